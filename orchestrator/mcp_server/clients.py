"""Who may call Jarvis's MCP server: one named client per agent (Claude Desktop, Cursor...), each with its own token.

A token is shown once, when the client is added (or its token renewed), and kept only as its SHA-256 digest in
`<data>/mcp_clients.json` (readable by the user only): a copy of the data folder gives no one a working token, and
a token is 32 random bytes, so a plain digest is as hard to reverse as the token is to guess. Revoking a client
removes it: its token stops working at the next request, in every process (the file is read on each check, cached
by its modification time).

Each client's calls are appended to `<data>/mcp_calls.jsonl` (time, client, tool, outcome) for `jarvis mcp clients`;
what its calls ran is in the runs view under its threads (`mcp:<client>:...`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.core.config import Settings
from orchestrator.core.ids import MCP_CLIENT_PREFIX
from orchestrator.core.private_file import write_private

CLIENTS_FILE = "mcp_clients.json"
CALLS_FILE = "mcp_calls.jsonl"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
TOKEN_ENV = "JARVIS_MCP_TOKEN"  # `jarvis mcp serve`: the token of the client that started it


class ClientError(ValueError):
    """A name that cannot be a client's, or a client that does not exist."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def client_thread(client: str, name: str) -> str:
    """The chat thread a client's work runs in: its own prefix, so one client never reads another's."""
    return f"{MCP_CLIENT_PREFIX}{client}:{name}"


def owns_thread(client: str, thread_id: str) -> bool:
    return thread_id.startswith(client_thread(client, ""))


@dataclass
class Client:
    name: str
    created: float
    calls: int = 0
    last_call: float | None = None


class ClientStore:
    def __init__(self, settings: Settings):
        self.path: Path = settings.data_path(CLIENTS_FILE)
        self.calls_path: Path = settings.data_path(CALLS_FILE)
        self._lock = threading.Lock()
        self._cache: tuple[float, dict[str, Any]] | None = None

    def _read(self) -> dict[str, Any]:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return {}
        if self._cache is not None and self._cache[0] == mtime:
            return self._cache[1]
        data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        self._cache = (mtime, data)
        return data

    def _write(self, data: dict[str, Any]) -> None:
        write_private(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        self._cache = None

    def add(self, name: str, *, renew: bool = False) -> str:
        """A new client (or, with renew, a new token for an existing one: the old one stops working); the token,
        shown once."""
        if not NAME_RE.match(name):
            raise ClientError(f"a client's name is 1-32 lowercase letters, digits, '-' or '_', starting with a "
                              f"letter or digit; {name!r} is not")
        token = secrets.token_urlsafe(32)
        with self._lock:
            data = dict(self._read())
            if name in data and not renew:
                raise ClientError(f"there is already a client named {name} (revoke it, or renew its token)")
            data[name] = {"sha256": digest(token), "created": time.time()}
            self._write(data)
        return token

    def revoke(self, name: str) -> None:
        with self._lock:
            data = dict(self._read())
            if data.pop(name, None) is None:
                raise ClientError(f"no MCP client named {name}")
            self._write(data)

    def who(self, token: str | None) -> str | None:
        """The client a presented token belongs to, or None (no token, a wrong one, a revoked one)."""
        if not token:
            return None
        presented = digest(token)
        found = None
        for name, entry in self._read().items():
            if secrets.compare_digest(presented, str(entry.get("sha256", ""))):
                found = name
        return found

    def record(self, client: str, tool: str, outcome: str) -> None:
        line = json.dumps({"at": time.time(), "client": client, "tool": tool, "outcome": outcome[:200]})
        with self._lock, self.calls_path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def list(self) -> list[Client]:
        clients = {name: Client(name, float(e.get("created", 0))) for name, e in sorted(self._read().items())}
        try:
            lines = self.calls_path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                call = json.loads(line)
            except ValueError:
                continue
            client = clients.get(call.get("client"))
            if client is not None and call.get("at", 0) >= client.created:
                client.calls += 1
                client.last_call = call["at"]
        return list(clients.values())


def client_config(settings: Settings, token: str, port: int | None = None) -> dict[str, Any]:
    """The `mcpServers` entries a client pastes: the HTTP endpoint of `jarvis run`, and the stdio command."""
    host = settings.server.host if settings.server.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{port or settings.server.port}{settings.mcp_server.path}"
    program = shutil.which("jarvis") or os.path.join(os.path.dirname(sys.executable), "jarvis")
    args = ["--config", str(settings.source_path)] if settings.source_path else []
    return {"mcpServers": {
        "jarvis": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}},
        "jarvis-stdio": {"command": program, "args": [*args, "mcp", "serve"], "env": {TOKEN_ENV: token}},
    }}
