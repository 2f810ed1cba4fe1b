"""The state of one MCP server as the manager tracks it, and small helpers of the manager."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, McpError
from mcp import types as mt

from orchestrator.core.aio import background_loop
from orchestrator.core.cgroups import RunCgroup
from .config import ServerConfig


class State(str, Enum):
    DISABLED = "disabled"
    UNAVAILABLE = "unavailable"
    BROKEN = "broken"  # its TOML file was refused
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    UNHEALTHY = "unhealthy"


@dataclass
class ServerStatus:
    name: str
    state: str
    tools: int
    last_error: str | None
    restarts: int
    description: str = ""
    source: str | None = None
    next_restart_in_s: float | None = None
    log_file: str | None = None
    note: str | None = None  # what else to know (a browser server: how its browsers' memory is bounded)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ServerRuntime:
    cfg: ServerConfig
    state: State = State.STOPPED
    tools: list[mt.Tool] = field(default_factory=list)
    session: ClientSession | None = None
    generation: int = 0  # increases on every successful start
    last_error: str | None = None
    restarts: int = 0
    next_restart_at: float | None = None
    task: asyncio.Task | None = None
    stopping: bool = False
    trouble: asyncio.Event | None = None
    trouble_reason: str | None = None
    ready: asyncio.Event | None = None  # set after the first attempt, ready or not
    log_path: Path | None = None
    log_offset: int = 0  # where this run's stderr starts in log_path (earlier runs' lines are not this run's)
    wake: asyncio.Event | None = None  # ends a backoff wait early (stop)
    inflight: set[asyncio.Task] = field(default_factory=set)  # tasks waiting on a call to this server
    killed: set[asyncio.Task] = field(default_factory=set)  # ... cancelled because the session failed
    relisting: asyncio.Task | None = None  # the listing of its tools after a tools/list_changed
    relist_again: bool = False  # changed again while that listing ran: it lists once more when done
    label: str | None = None  # its log's name when not the server's (a task's browser: "playwright-2")
    browser_dir: Path | None = None  # `{browser_dir}` of a browser server's run (mcp/browser_pool.py)
    cgroup: RunCgroup | None = None  # the cgroup its process runs in from its first instruction (a browser's)


# A server's whole tool list, not only each message, is bounded: pages of 11 MB, each under the message limit, one
# after the other kept about 256 MB of Jarvis's memory each (five pages: 1.28 GB). Past either bound the server is
# refused at start, saying why, rather than a part of its tools offered.
MAX_TOOLS = 2000
MAX_TOOL_LIST_CHARS = 8_000_000


class ToolListTooLarge(RuntimeError):
    pass


async def list_all_tools(session: ClientSession) -> list[mt.Tool]:
    tools: list[mt.Tool] = []
    cursor: str | None = None
    size = 0
    for _ in range(1000):
        page = await session.list_tools(cursor=cursor)
        tools.extend(page.tools or [])
        size += sum(len(t.model_dump_json()) for t in page.tools or [])
        if len(tools) > MAX_TOOLS or size > MAX_TOOL_LIST_CHARS:
            raise ToolListTooLarge(f"its tool list is over {MAX_TOOLS} tools or {MAX_TOOL_LIST_CHARS // 1_000_000} MB "
                                   f"({len(tools)} tools, {size // 1_000_000} MB so far): not loaded")
        cursor = page.nextCursor
        if not cursor:
            break
    return tools


def current_task_or_none() -> asyncio.Task | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def on_background_loop() -> bool:
    try:
        return asyncio.get_running_loop() is background_loop()
    except RuntimeError:
        return False


def shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_failure(exc: BaseException, srv: ServerRuntime) -> str:
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        if inner:
            return describe_failure(inner[0], srv)
    if isinstance(exc, TimeoutError):
        return f"it did not finish starting within {srv.cfg.startup_timeout_s:g} s (startup_timeout_s)"
    if isinstance(exc, FileNotFoundError):
        return f"{srv.cfg.command} was not found: {exc}"
    if isinstance(exc, McpError):
        return f"it failed to start: {exc.error.message}"
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"it failed to start ({shorten(text, 200)})"
