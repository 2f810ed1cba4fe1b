"""MCP server health in the Settings view: each server of `mcp.dir` with its state, tool count, last error and
what to do (the same figures as `jarvis mcp status --json`). Checking starts servers that have not started yet
(waiting up to `mcp.startup_wait_s`), like the first chat turn does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import AppContext
from .settings import HEALTH_CHECKS

TITLE = "MCP servers"


def _item(s: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": s.name, "state": s.state, "ok": None, "message": "", "fix": None,
                            "tools": s.tools, "restarts": s.restarts, "source": s.source, "log_file": s.log_file}
    where = s.source or "its TOML file"
    if s.state == "ready":
        item.update(ok=True, message=f"{s.tools} tool(s)" + (f", restarted {s.restarts} time(s)" if s.restarts else ""))
    elif s.state == "unhealthy":
        retry = f" Jarvis restarts it by itself (next try in {s.next_restart_in_s:g} s)." if s.next_restart_in_s else ""
        log = f" Its log: {s.log_file}." if s.log_file else ""
        item.update(ok=False, message=s.last_error or "it stopped answering",
                    fix=f"Check that its command runs on its own and fix {where}.{retry}{log}")
    elif s.state == "broken":
        item.update(ok=False, message=s.last_error or "its file was refused",
                    fix=f"Correct {where}; the folder is re-read on its own, no restart needed.")
    elif s.state == "disabled":
        item.update(message=f"switched off: enabled = false in {where}")
    elif s.state == "unavailable":
        item.update(message=s.last_error or "not available on this machine")
    else:  # stopped, starting
        item.update(message="starting" if s.state == "starting" else "not started yet (it starts on first use)")
    return item


def mcp_servers_health(ctx: AppContext) -> dict[str, Any]:
    settings = ctx.settings
    folder = Path(settings.mcp.dir)
    hint = f"Add one TOML file per server to {folder}, or import existing ones with `jarvis mcp import FILE`."
    if not folder.is_dir():
        return {"title": TITLE, "items": [], "note": f"No MCP servers: the folder {folder} does not exist. {hint}"}
    manager = ctx.app.mcp_manager
    manager.ensure_started(wait_s=settings.mcp.startup_wait_s)
    items = [_item(s) for s in manager.status()]
    return {"title": TITLE, "items": items, "note": None if items else f"No MCP servers configured. {hint}"}


HEALTH_CHECKS.append(mcp_servers_health)
