"""MCP server definitions: one TOML file per server in `mcp.dir` (mcp/ of the checkout by default).

    # mcp/adb.toml                                   the file name is the server's name
    description = "An Android phone over ADB"
    command = "npx"                                 # stdio: the program and its arguments
    args = ["-y", "@mobilenext/mobile-mcp@1.0.4"]
    env = { MOBILEMCP_DISABLE_TELEMETRY = "1", API_KEY = { secret = "adb_key" } }
    transport = "stdio"                             # or "streamable_http" / "sse" with url = "..."
    enabled = true
    platforms = []                                  # e.g. ["darwin"]: only on macOS
    requires = ["adb", "npx"]                       # programs that must exist, else "unavailable"
    timeout_s = 60                                  # one tool call; past it the server is restarted
    side_effects = ["phone_automation"]             # default for tools without readOnlyHint
    [tools.mobile_take_screenshot]                  # per-tool overrides
    side_effects = []
    [tools.mobile_uninstall_app]
    enabled = false

`jarvis mcp import FILE` turns the `mcpServers` JSON of Claude Desktop, Cursor, Jan and others into such files.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.core import json_bounds, secrets
from orchestrator.core.config import SecretRef

log = logging.getLogger(__name__)

DEFAULT_SIDE_EFFECTS = ["ui_automation"]
_EFFECT_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_NAME_RE = re.compile(r"[^a-z0-9_-]+")
_SECRET_KEY_RE = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|AUTH|CREDENTIAL)", re.I)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_effects(values: list[str] | None) -> list[str] | None:
    for v in values or []:
        if not _EFFECT_RE.match(v):
            raise ValueError(f"side effect {v!r} must be a lower-case name such as 'ui_automation'")
    return values


class ToolOverride(_Model):
    side_effects: list[str] | None = Field(None, description="replaces what the annotations say")
    enabled: bool = True

    _effects = field_validator("side_effects")(_check_effects)


class WrapperMap(_Model):
    """How a typed wrapper tool (apple_mail_send, ...) calls this server: which tool, with which arguments.

    In `arguments`, a string that is exactly "{name}" is replaced by the wrapper's argument `name` (keeping
    its type); keys whose value ends up None are left out; everything else is sent as written."""

    tool: str
    arguments: dict[str, Any] | None = None


class AndroidLoop(_Model):
    """Settings of the android_task loop when this server drives the phone."""

    device_arg: str | None = Field("device", description="the argument naming the device in each tool, if any")
    device: str | None = Field(None, description="the device id; default: the first one the server lists")
    list_devices_tool: str | None = "mobile_list_available_devices"
    exclude_tools: list[str] = Field(default_factory=list, description="tools the phone loop may not use")


class BrowserSection(_Model):
    """The server drives a web browser (mcp/browser.py): steps approved per site and task, its downloads moved
    into the first of `fs.roots`, the browser closed when the task ends."""

    url_arg: str = Field("url", description="the argument of a tool that names the URL it goes to")
    close_tool: str | None = Field("browser_close", description="the tool that closes the browser")
    downloads_dir: str | None = Field(None, description="where the server saves downloads ({data_dir} expands)")
    max_download_mb: float = Field(200.0, gt=0, description="a bigger download stays in downloads_dir, unmoved")
    # A page starts downloads without a click: what one task's browser moves into the root is bounded in all.
    max_task_download_mb: float = Field(1024.0, gt=0, description="downloads one task moves into the file root, "
                                                                   "in all; past it they stay in downloads_dir")
    max_task_downloads: int = Field(100, ge=0, description="files one task moves into the file root; past it they "
                                                           "stay in downloads_dir")
    min_free_disk_mb: float = Field(1024.0, ge=0, description="a download that would leave less free space on the "
                                                              "file root's disk stays in downloads_dir")
    unknown_target: list[str] = Field(default_factory=lambda: ["browser_navigate_back"],
                                      description="tools that go where no argument says: they always ask")
    # One browser (one server process) per task (mcp/browser_pool.py):
    max_browsers: int = Field(3, ge=1, le=32, description="browsers running at once; a task beyond waits or is told")
    idle_timeout_s: float = Field(600.0, gt=0, description="a task's browser unused this long is closed")
    storage_state: str | None = Field(None, description="logins kept between tasks (cookies, local storage), per "
                                                        "approved site; the server's args load it")
    save_state_tool: str | None = Field("browser_storage_state", description="the tool that saves a browser's "
                                                                             "storage state to a file")
    memory_mb: int = Field(1536, ge=0, description="a task's browser (its server and every process it starts) is "
                                                   "bounded to this much memory by a cgroup where one can be made "
                                                   "(0: none); past it the browser is restarted")


class ServerConfig(_Model):
    name: str = ""
    description: str = ""
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str | SecretRef] = Field(default_factory=dict)
    cwd: str | None = None
    transport: Literal["stdio", "streamable_http", "sse"] = "stdio"
    url: str | None = None
    headers: dict[str, str | SecretRef] = Field(default_factory=dict)
    enabled: bool = True
    platforms: list[str] = Field(default_factory=list)
    requires: list[str] = Field(default_factory=list)
    install_hint: str | None = None
    timeout_s: float = Field(30.0, gt=0)
    startup_timeout_s: float = Field(60.0, gt=0)
    side_effects: list[str] = Field(default_factory=lambda: list(DEFAULT_SIDE_EFFECTS))
    tools: dict[str, ToolOverride] = Field(default_factory=dict)
    wrappers: dict[str, WrapperMap] = Field(default_factory=dict)
    android: AndroidLoop | None = None
    browser: BrowserSection | None = None

    source: Path | None = Field(None, exclude=True)

    _effects = field_validator("side_effects")(_check_effects)

    @model_validator(mode="after")
    def _transport_needs(self) -> "ServerConfig":
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs 'command' (the program to start)")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"transport {self.transport!r} needs 'url'")
        return self

    def availability(self) -> str | None:
        """None when this server can run here; otherwise why not, in one sentence with what to do."""
        if self.platforms and not any(sys.platform.startswith(p) for p in self.platforms):
            names = {"darwin": "macOS", "linux": "Linux", "win32": "Windows"}
            wanted = " or ".join(names.get(p, p) for p in self.platforms)
            return f"{wanted} only (this machine is {names.get(sys.platform, sys.platform)})"
        needed = list(self.requires)
        if self.transport == "stdio" and self.command:
            needed.insert(0, self.command)
        for program in dict.fromkeys(needed):
            if not program_exists(program):
                hint = f"; {self.install_hint}" if self.install_hint else ""
                where = "no such file" if "/" in program else "not found on PATH"
                return f"{program} is not installed ({where}){hint}"
        return None


def expand(value: str, data_dir: Path, mcp_dir: Path | None = None, browser_dir: Path | None = None) -> str:
    """`{data_dir}` in an argument, cwd or env value: Jarvis's data folder (a browser's profile lives there);
    `{mcp_dir}`: the folder of the server files (a server's own config file next to its TOML); `{browser_dir}`:
    the folder of one running browser server (mcp/browser_pool.py), data/browser/<server>[-<n>]."""
    value = value.replace("{data_dir}", str(data_dir))
    if browser_dir is not None:
        value = value.replace("{browser_dir}", str(browser_dir))
    return value.replace("{mcp_dir}", str(mcp_dir)) if mcp_dir is not None else value


def program_exists(program: str) -> bool:
    if "/" in program:
        return Path(program).expanduser().exists()
    return shutil.which(program) is not None


@dataclass
class LoadedServers:
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # server name -> why its file was refused


def server_name_for(text: str) -> str:
    name = _NAME_RE.sub("-", text.strip().lower()).strip("-_")
    return name or "server"


def _format_error(path: Path, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = "unknown key (check its spelling)" if e["type"] == "extra_forbidden" else e["msg"]
        parts.append(f"{key}: {msg}")
    return f"{path}: " + "; ".join(parts)


MAX_SERVERS_FILE_BYTES = 1_000_000  # a server's TOML, Claude Desktop's JSON: a few KB; never read more than this


def _read_small_text(path: Path, what: str, instead: str) -> str:
    """The text of a settings file, read no further than MAX_SERVERS_FILE_BYTES. Raises ValueError saying `what`
    the file is not, and what to do `instead`."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_SERVERS_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read: {exc}") from None
    if len(data) > MAX_SERVERS_FILE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_SERVERS_FILE_BYTES // 1_000_000} MB, so not {what}; {instead}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not text (UTF-8), so not {what}") from None


def load_server_file(path: Path) -> ServerConfig:
    """Parse and validate one file. Raises ValueError with the file, the key and what was wrong."""
    text = _read_small_text(path, "an MCP server's settings", "remove it from mcp.dir")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per level of nesting and has no limit of its own
        raise ValueError(f"{path}: not valid TOML: it nests arrays or tables too deep") from None
    try:
        cfg = ServerConfig.model_validate(raw)
    except ValidationError as err:
        raise ValueError(_format_error(path, err)) from None
    cfg.name = server_name_for(cfg.name or path.stem)
    cfg.source = path
    return cfg


def load_servers(mcp_dir: Path) -> LoadedServers:
    """Every *.toml of the folder; a broken file is reported and the others still load."""
    loaded = LoadedServers()
    if not mcp_dir.is_dir():
        return loaded
    for path in sorted(mcp_dir.glob("*.toml")):
        try:
            cfg = load_server_file(path)
        except ValueError as exc:
            loaded.errors[server_name_for(path.stem)] = str(exc)
            continue
        if cfg.name in loaded.servers:
            loaded.errors[cfg.name] = f"{path}: server name {cfg.name!r} is already used by {loaded.servers[cfg.name].source}"
            continue
        loaded.servers[cfg.name] = cfg
    return loaded


# -- `jarvis mcp import` ------------------------------------------------------------------------------

class ImportedServer(BaseModel):
    """One entry of an mcpServers JSON file, as the common clients write it."""

    model_config = ConfigDict(extra="allow")
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    type: str | None = None
    transport: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    disabled: bool = False
    timeout: float | None = None


@dataclass
class ImportResult:
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "name: why"
    notes: list[str] = field(default_factory=list)


_TRANSPORTS = {"stdio": "stdio", "http": "streamable_http", "streamable-http": "streamable_http",
               "streamable_http": "streamable_http", "sse": "sse"}


def read_mcp_servers_json(path: Path) -> dict[str, Any]:
    text = _read_small_text(path, "a list of MCP servers", "give the JSON file of Claude Desktop, Cursor or Jan")
    try:
        data = json_bounds.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except json_bounds.TooDeep as exc:
        raise ValueError(f"{path}: not a list of MCP servers: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object with an 'mcpServers' key")
    servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, dict):
        raise ValueError(f"{path}: no 'mcpServers' object found (the format of Claude Desktop, Cursor and Jan: "
                         '{"mcpServers": {"name": {"command": ..., "args": [...]}}})')
    return servers


def _secret_value(server: str, key: str, value: str, store_secrets: bool, notes: list[str]) -> str | dict[str, str]:
    """Keep credentials out of the TOML file: move them to the keyring and write a reference."""
    if not store_secrets or not value or not _SECRET_KEY_RE.search(key) or value.startswith("${"):
        return value
    name = f"mcp_{server}_{key}".lower().replace("-", "_")
    try:
        secrets.set_secret(name, value)
    except Exception as exc:  # noqa: BLE001 - no keyring: keep the value where the user had it, and say so
        notes.append(f"{server}: {key} kept in the TOML file (the keyring refused it: {exc})")
        return value
    notes.append(f"{server}: {key} moved to the keyring as {name!r}")
    return {"secret": name}


def convert_entry(name: str, entry: dict[str, Any], *, store_secrets: bool, notes: list[str]) -> dict[str, Any]:
    """One mcpServers entry -> the TOML table of a ServerConfig (validated before it is written)."""
    item = ImportedServer.model_validate(entry)
    if not item.command and not item.url:
        raise ValueError("it has neither 'command' (a program to start) nor 'url' (a server to connect to)")
    kind = (item.transport or item.type or ("stdio" if item.command else "streamable_http")).lower()
    transport = _TRANSPORTS.get(kind)
    if transport is None:
        raise ValueError(f"unknown transport {kind!r} (known: stdio, http, streamable-http, sse)")
    out: dict[str, Any] = {"description": f"imported from an mcpServers file ({name})", "transport": transport}
    if transport == "stdio":
        out["command"] = item.command
        if item.args:
            out["args"] = item.args
        if item.cwd:
            out["cwd"] = item.cwd
    else:
        out["url"] = item.url
    if item.env:
        out["env"] = {k: _secret_value(name, k, v, store_secrets, notes) for k, v in item.env.items()}
    if item.headers:
        out["headers"] = {k: _secret_value(name, k, v, store_secrets, notes) for k, v in item.headers.items()}
    out["enabled"] = not item.disabled
    if item.timeout:
        # Claude Code and Cline write milliseconds; values above 1000 can only be that.
        out["timeout_s"] = item.timeout / 1000 if item.timeout > 1000 else item.timeout
    extra = sorted(set(entry) - set(ImportedServer.model_fields))
    if extra:
        notes.append(f"{name}: ignored keys {', '.join(extra)} (Jarvis asks through its autonomy policy instead)")
    ServerConfig.model_validate(out)  # refuse what Jarvis could not load
    return out


def import_mcp_servers(json_path: Path, mcp_dir: Path, *, overwrite: bool = False,
                       store_secrets: bool = True) -> ImportResult:
    import tomli_w

    servers = read_mcp_servers_json(json_path)
    result = ImportResult()
    mcp_dir.mkdir(parents=True, exist_ok=True)
    for raw_name, entry in servers.items():
        name = server_name_for(str(raw_name))
        target = mcp_dir / f"{name}.toml"
        if not isinstance(entry, dict):
            result.skipped.append(f"{raw_name}: not an object")
            continue
        if target.exists() and not overwrite:
            result.skipped.append(f"{raw_name}: {target} exists (use --overwrite to replace it)")
            continue
        try:
            table = convert_entry(name, entry, store_secrets=store_secrets, notes=result.notes)
        except (ValueError, ValidationError) as exc:
            why = ("; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
                   if isinstance(exc, ValidationError) else str(exc))
            result.skipped.append(f"{raw_name}: {why}")
            continue
        header = (f"# MCP server {raw_name!r}, imported from {json_path.name} by `jarvis mcp import`.\n"
                  "# Side effects default to ui_automation (asks first) unless a tool says it is read-only;\n"
                  "# set them per tool with [tools.NAME] side_effects = [...].\n")
        target.write_text(header + tomli_w.dumps(table), encoding="utf-8")
        result.written.append(target)
    return result
