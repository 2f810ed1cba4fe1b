"""The MCP tool provider of the catalog: every tool of every ready MCP server as a LangChain tool with Jarvis
metadata, plus the typed wrappers built on them (apple_* on Macuse, android_task_* on the phone server).

- Tools are converted by langchain-mcp-adapters; each call goes to the server's long-lived session held by
  the McpManager (never a new process per call).
- Side effects: the server's TOML (`[tools.NAME] side_effects`), else the tool's annotations (readOnlyHint ->
  none; destructiveHint or no hint -> the server's `side_effects`, ui_automation unless set).
- Every MCP result is untrusted_output: content from outside the conversation. A tool that may reach the open
  world (openWorldHint not false) `sends_out`: after untrusted content it asks first even when read-only.
- Exposed names are the MCP names, made safe for model APIs; a name that two servers share (or that a static
  tool already has) is prefixed with the server name, on every server that has it. Names are computed over the
  tool lists of every configured server seen so far (kept in data/mcp/tool_names.json), so they do not change
  with which server happens to be up.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from langchain_mcp_adapters.tools import convert_mcp_tool_to_langchain_tool
from mcp import types as mt

from integrations.android_tools import build_android_tools
from integrations.apple_tools import build_apple_tools
from integrations.base import ToolError, set_tool_meta

from orchestrator.core.aio import run_on_background
from orchestrator.tools.site_grants import SiteScope
from .browser import Downloads, browser_parts, task_of_call
from orchestrator.core.config import Settings
from orchestrator.core.visible import elide, visible
from .config import ServerConfig
from .manager import McpManager, State
from .pins import PinsUnreadable, ToolChange, pins_of

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
# The task a call of a browser server's tool is for (thread id, task): the manager sends it to that task's browser.
_TASK: contextvars.ContextVar[tuple[str, str | None] | None] = contextvars.ContextVar("mcp_task", default=None)


@dataclass
class McpToolInfo:
    server: str
    mcp_name: str
    exposed_name: str
    side_effects: list[str]
    enabled: bool
    description: str = ""
    changed: bool = False  # its description or schema changed since first seen: withheld until reviewed (pins.py)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def resolve_side_effects(cfg: ServerConfig, tool: mt.Tool) -> list[str]:
    override = cfg.tools.get(tool.name)
    if override is not None and override.side_effects is not None:
        return list(override.side_effects)
    if tool.annotations is not None and tool.annotations.readOnlyHint:
        return []
    return list(cfg.side_effects)


def reaches_open_world(tool: mt.Tool) -> bool:
    """MCP's openWorldHint defaults to true: unless the server says the tool stays in a closed world, what it is
    given may leave the machine (a fetch of a URL carries its query string)."""
    return tool.annotations is None or tool.annotations.openWorldHint is not False


# Names Jarvis gives its own tools next to the MCP ones: the tool search, the tool factory, and the typed wrappers
# (apple_*, android_*) built over some servers. An MCP tool never takes one.
OWN_NAMES = frozenset({"find_tools", "create_new_tool"})
OWN_PREFIXES = ("apple_", "android_")


def safe_name(name: str) -> str:
    return _SAFE.sub("_", name).strip("_")[:64] or "tool"


def exposed_names(tool_names: dict[str, list[str]], reserved: set[str] = frozenset()) -> dict[tuple[str, str], str]:
    """(server, mcp_name) -> the name the model sees, one name per tool: never a name of Jarvis's own (`reserved`,
    and its wrappers' and helpers' names, OWN_NAMES) and never another tool's. A server offering `find_tools`, or
    `notes` offering `github_create_issue` next to github's `create_issue`, took over the other tool's calls.
    Deterministic for a given set of servers and tools."""
    counts: dict[str, int] = {}
    for names in tool_names.values():
        for n in set(safe_name(x) for x in names):
            counts[n] = counts.get(n, 0) + 1
    taken = set(reserved) | OWN_NAMES
    prefixes = {server: f"{safe_name(server)}_" for server in tool_names}
    out: dict[tuple[str, str], str] = {}
    for server, names in sorted(tool_names.items()):
        others = tuple(p for s, p in prefixes.items() if s != server)  # a name dressed as another server's
        for n in sorted(names):
            base = safe_name(n)
            clash = (counts.get(base, 0) > 1 or base in taken or base.startswith(OWN_PREFIXES)
                     or base.startswith(others))
            name = safe_name(f"{server}_{base}")[:64] if clash else base
            suffix = 2
            while name in taken:  # `x.y` and `x_y` of one server, or a prefixed name another tool has
                name = f"{name[:60]}_{suffix}"
                suffix += 1
            taken.add(name)
            out[(server, n)] = name
    return out


def content_to_text(content: Any, artifact: Any = None) -> str:
    """MCP content blocks as text for the model: images and files become a short note, not base64."""
    parts: list[str] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, dict):
            kind = block.get("type")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind in ("image", "file"):
                size = len(block.get("base64") or "") * 3 // 4
                where = f" at {block['url']}" if block.get("url") else f", {size // 1024} KB"
                parts.append(f"[{kind} {block.get('mime_type') or ''}{where} not shown]")
            else:
                parts.append(json.dumps(block, default=str)[:2000])
        elif block is not None:
            parts.append(str(block))
    text = "\n".join(p for p in parts if p)
    structured = (artifact or {}).get("structured_content") if isinstance(artifact, dict) else None
    if structured is not None and not text.strip():
        text = json.dumps(structured, ensure_ascii=False, default=str)
    return text


def result_text(result: mt.CallToolResult) -> str:
    """A CallToolResult as text (the wrappers' path, which does not go through the adapter), by the same rule as
    content_to_text: its blocks as the adapter's dicts."""
    blocks: list[dict[str, Any]] = []
    for block in result.content:
        if isinstance(block, mt.TextContent):
            blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, mt.EmbeddedResource) and isinstance(block.resource, mt.TextResourceContents):
            blocks.append({"type": "text", "text": block.resource.text})
        elif isinstance(block, (mt.ImageContent, mt.AudioContent)):
            blocks.append({"type": "image" if isinstance(block, mt.ImageContent) else "file",
                           "mime_type": block.mimeType, "base64": block.data})
        else:
            blocks.append({"type": "file", "mime_type": getattr(block, "mimeType", None) or block.type})
    return content_to_text(blocks, {"structured_content": result.structuredContent})


class _SessionProxy:
    """What langchain-mcp-adapters calls `session`: routes call_tool to the manager's live session."""

    def __init__(self, manager: McpManager, server: str):
        self.manager = manager
        self.server = server

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, progress_callback: Any = None,
                        **_: Any) -> mt.CallToolResult:
        return await self.manager.call_tool(self.server, name, arguments, progress_callback, task=_TASK.get())


def make_mcp_tool(manager: McpManager, cfg: ServerConfig, tool: mt.Tool, exposed: str,
                  browser: tuple[SiteScope, Downloads | None] | None = None) -> BaseTool:
    """`browser`: the server drives a browser (mcp/browser.py): the tool carries its site scope, and downloads its
    result reports are moved into the file root."""
    lc = convert_mcp_tool_to_langchain_tool(_SessionProxy(manager, cfg.name), tool, server_name=cfg.name,  # type: ignore[arg-type]
                                            handle_tool_errors=False)
    inner = lc.coroutine
    server, mcp_name = cfg.name, tool.name

    # No annotations on purpose: LangChain resolves the coroutine's type hints on every call, and string
    # annotations (from __future__) cost a compile() each time.
    async def call(*args, **kwargs):  # type: ignore[no-untyped-def]
        task = task_of_call() if browser else None

        async def for_task():  # type: ignore[no-untyped-def]
            _TASK.set(task)  # in the background loop's own task: the session proxy reads it there
            return await inner(*args, **kwargs)  # type: ignore[misc]

        try:
            content, artifact = await run_on_background(for_task())
        except ToolException as exc:  # the tool answered isError=True: its message is for the model
            raise ToolError(f"{server}'s {mcp_name} reported an error: {exc}", server_text=str(exc)) from None
        return content_to_text(content, artifact), artifact

    downloads = browser[1] if browser else None

    def collect(text: str, thread_id: str, task: str | None, move: bool) -> str:
        """The downloads a result reports, moved from this task's browser folder (mcp/browser.Downloads)."""
        key = (thread_id, task)
        mover = downloads.at(manager.browsers.folder_of(server, key)) if downloads is not None else None
        return mover.collect(text, key, move=move) if mover is not None else text

    lc.coroutine = call
    lc.name = exposed
    # A server's descriptions reach the model as instructions and the user as its tool list: characters that hide
    # text (tag characters can carry a whole instruction, "tool poisoning") are written out for both to see.
    lc.description = visible(f"{(tool.description or tool.title or tool.name).strip()} (MCP server '{server}')"[:1024])
    if isinstance(lc.args_schema, dict):
        lc.args_schema = _described_visibly(lc.args_schema)
    effects = resolve_side_effects(cfg, tool)
    return set_tool_meta(lc, side_effects=effects, source="mcp", server=server,
                         mcp_name=mcp_name, sends_out=reaches_open_world(tool),
                         summarize=lambda a, s=server, n=mcp_name: (
                             f"Use {n} on the MCP server '{s}'" + (f" with {_args_text(a)}." if a else ".")),
                         **({"site_scope": _scope_of(browser[0], cfg, tool.name, collect)} if browser else {}))


def _scope_of(scope: SiteScope, cfg: ServerConfig, tool: str, collect: Any) -> SiteScope:
    unknown = cfg.browser is not None and tool in cfg.browser.unknown_target
    return dataclasses.replace(scope, collect=collect, unknown_target=unknown or scope.unknown_target)


def _args_text(args: dict[str, Any]) -> str:
    return elide(", ".join(f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()), 300)


def _described_visibly(schema: Any) -> Any:
    """The input schema with every description and title made visible (core/visible.py); names, types and values
    untouched, since calls are validated against them."""
    if isinstance(schema, list):
        return [_described_visibly(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _described_visibly(spec) for name, spec in value.items()}  # keys are names here
        elif key in ("description", "title") and isinstance(value, str):
            out[key] = visible(value)
        elif key in ("enum", "const", "default", "examples", "required"):
            out[key] = value
        else:
            out[key] = _described_visibly(value)
    return out


class _Backend:
    """integrations.apple_tools.McpBackend over the manager."""

    def __init__(self, manager: McpManager, server: str):
        self.manager = manager
        self.server = server

    def input_schema(self, tool: str) -> dict[str, Any] | None:
        for t in self.manager.tools_of(self.server):
            if t.name == tool:
                return t.inputSchema
        return None

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        result = await run_on_background(self.manager.call_tool(self.server, tool, arguments))
        text = result_text(result)
        if result.isError:
            raise ToolError(f"{self.server}'s {tool} reported an error: {text or '(no message)'}")
        return text


class McpProvider:
    """Catalog provider: the tools of ready MCP servers, rebuilt only when a server (re)starts or changes."""

    name = "mcp"

    def __init__(self, settings: Settings, manager: McpManager,
                 reserved: Callable[[], set[str]] | None = None, wrappers: bool = True,
                 android: Callable[[], Any] | None = None):
        """`manager`: the App's MCP servers. `android`: returns the App's Android task service; without it a
        server with an [android] section gets no phone-task tools."""
        self.settings = settings
        self.manager = manager
        self.reserved = reserved or (lambda: set())
        self.wrappers = wrappers
        self._lock = threading.Lock()
        self._signature: tuple | None = None
        self._tools: dict[str, BaseTool] = {}
        self._infos: list[McpToolInfo] = []
        self.wrapper_problems: dict[str, str] = {}
        self._first = True
        self._names_path = Path(settings.data_dir) / "mcp" / "tool_names.json"
        self.pins = pins_of(settings.data_dir)
        self.withheld: dict[tuple[str, str], ToolChange] = {}  # (server, MCP name): changed since first seen
        self.pins_problem: str | None = None  # the pin file cannot be read: every MCP tool is withheld (pins.py)
        self._android: Any = None
        self._android_service = android

    # -- names ------------------------------------------------------------------------------------------
    def _known_names(self, ready: list[tuple[ServerConfig, list[mt.Tool], int]]) -> dict[str, list[str]]:
        try:
            known = json.loads(self._names_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            known = {}
        changed = False
        for cfg, tools, _gen in ready:
            names = sorted(t.name for t in tools)
            if known.get(cfg.name) != names:
                known[cfg.name] = names
                changed = True
        configured = {n for n, c in self.manager.configs().items() if c.enabled}
        known = {k: v for k, v in known.items() if k in configured}
        if changed:
            try:
                self._names_path.parent.mkdir(parents=True, exist_ok=True)
                self._names_path.write_text(json.dumps(known, indent=1, sort_keys=True), encoding="utf-8")
            except OSError:
                log.debug("cannot write %s", self._names_path, exc_info=True)
        return known

    # -- building -----------------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        ready = self.manager.ready_servers()
        reserved = self.reserved()
        signature = (tuple((c.name, g) for c, _t, g in ready), tuple(sorted(reserved)), self.pins.version())
        if signature == self._signature:
            return
        names = exposed_names(self._known_names(ready), reserved)
        tools: dict[str, BaseTool] = {}
        infos: list[McpToolInfo] = []
        problems: dict[str, str] = {}
        withheld: dict[tuple[str, str], ToolChange] = {}
        self.pins_problem = None
        for cfg, server_tools, _gen in ready:
            browser = self._browser_parts(cfg)
            try:
                changes = self.pins.changed(cfg.name, server_tools)
            except PinsUnreadable as exc:  # nothing to judge its tools by: none is offered, not all
                if self.pins_problem is None:
                    log.warning("%s", exc)
                self.pins_problem = str(exc)
                continue
            for t in server_tools:
                exposed = names.get((cfg.name, t.name)) or safe_name(t.name)
                enabled = cfg.tools.get(t.name).enabled if t.name in cfg.tools else True
                infos.append(McpToolInfo(cfg.name, t.name, exposed, resolve_side_effects(cfg, t), enabled,
                                         (t.description or "").strip().splitlines()[0][:200] if t.description else "",
                                         changed=t.name in changes))
                if t.name in changes:
                    withheld[(cfg.name, t.name)] = changes[t.name]
                    if (cfg.name, t.name) not in self.withheld:
                        log.warning("MCP server '%s' %s its tool %s since it was first seen: not offered until "
                                    "reviewed (jarvis mcp review %s)", cfg.name,
                                    "added" if changes[t.name].added else "changed", t.name, cfg.name)
                elif enabled:
                    tools[exposed] = make_mcp_tool(self.manager, cfg, t, exposed, browser)
            if self.wrappers and cfg.wrappers:
                built, why = build_apple_tools(_Backend(self.manager, cfg.name), cfg.wrappers,
                                               {t.name for t in server_tools}, str(cfg.source or f"{cfg.name}.toml"))
                for w in built:
                    tools.setdefault(w.name, w)
                problems.update(why)
        if self.wrappers and self.pins_problem is None:
            for tool in self._android_tools(ready):
                tools.setdefault(tool.name, tool)
        self._tools, self._infos, self.wrapper_problems, self.withheld = tools, infos, problems, withheld
        self._signature = signature

    def _browser_parts(self, cfg: ServerConfig) -> tuple[SiteScope, Downloads | None] | None:
        if cfg.browser is None:
            return None
        pool, server = self.manager.browsers, cfg.name

        def close(thread_id: str, task: str | None, approved: set[str]) -> None:  # the task ended: its browser goes
            pool.release(server, (thread_id, task), approved)

        return browser_parts(server, cfg.browser, self.settings.data_dir, list(self.settings.fs.roots), close)

    def _android_tools(self, ready: list[tuple[ServerConfig, list[mt.Tool], int]]) -> list[BaseTool]:
        if self._android_service is None or not any(cfg.android is not None for cfg, _t, _g in ready):
            return []
        if self._android is None:
            self._android = self._android_service()
        return build_android_tools(self._android)

    def server_tools(self, server: str) -> list[BaseTool]:
        """The enabled raw MCP tools of one server (for the phone loop), as exposed to the executor."""
        with self._lock:
            self._rebuild()
            wanted = {i.exposed_name for i in self._infos if i.server == server and i.enabled}
            return [t for n, t in self._tools.items() if n in wanted]

    # -- the provider interface ---------------------------------------------------------------------------
    def list_tools(self) -> list[BaseTool]:
        wait = self.settings.mcp.startup_wait_s if self._first else 0.0
        self._first = False
        self.manager.ensure_started(wait_s=wait)
        with self._lock:
            self._rebuild()
            return list(self._tools.values())

    def get_tool(self, name: str) -> BaseTool | None:
        with self._lock:
            tool = self._tools.get(name)
            if tool is not None:
                return tool
        return next((t for t in self.list_tools() if t.name == name), None)

    def unavailable_message(self, name: str) -> str | None:
        """What a call to a tool of a server that is down, restarting or still starting gets back, instead of
        "there is no tool named ..." (the tool exists; its server will be back). A server whose tools are not known
        yet (its TOML file was just added, or it never came up) may be the one that has it: the call is told so.
        None when `name` is no such tool and every server has listed its tools."""
        self.manager.refresh_config(force=True)  # a TOML file added a moment ago counts at once
        self.manager.ensure_started()  # ... and its server starts now, not at the next turn
        known = self._known_names(self.manager.ready_servers())
        names = exposed_names(known, self.reserved())
        server = next((srv for (srv, mcp_name), exposed in names.items() if exposed == name), None)
        statuses = self.manager.status()
        if server is None:
            pending = [s for s in statuses if s.name not in known and s.state in ("stopped", "starting", "unhealthy")]
            if not pending:
                return None
            said = ", ".join(f"'{s.name}' ({_when_back(s)})" for s in pending)
            return (f"Error: {name} is not available yet: it may be a tool of the MCP server(s) {said}, whose tools "
                    "are not known until the server is ready. Try again in a moment; `jarvis mcp status` shows the "
                    "details.")
        status = next((s for s in statuses if s.name == server), None)
        if status is None or status.state == "ready":
            return None
        when = f"; it restarts in {status.next_restart_in_s:.0f} s" if status.next_restart_in_s is not None else ""
        # its state, not its last error: that is the server's own text (its stderr), which would reach the model
        # in a result nothing marks as outside content; `jarvis mcp status` shows it to the user
        return (f"Error: {name} is a tool of the MCP server '{server}', which is not available right now "
                f"({status.state}{when}). "
                "Try again later or use another tool; `jarvis mcp status` shows the details.")

    def infos(self) -> list[McpToolInfo]:
        self.list_tools()
        with self._lock:
            return list(self._infos)


def _when_back(status: Any) -> str:
    if status.state == "unhealthy":
        again = f", it restarts in {status.next_restart_in_s:.0f} s" if status.next_restart_in_s is not None else ""
        return f"not available{again}"
    return "still starting"


def mcp_provider(settings: Settings, manager: McpManager, reserved: Callable[[], set[str]] | None = None,
                 android: Callable[[], Any] | None = None) -> McpProvider | None:
    """The provider for the catalog, or None when mcp.dir does not exist. Servers start on first use."""
    if not Path(settings.mcp.dir).is_dir():
        return None
    return McpProvider(settings, manager, reserved=reserved, android=android)


__all__ = ["McpProvider", "McpToolInfo", "State", "exposed_names", "make_mcp_tool", "mcp_provider",
           "resolve_side_effects"]
