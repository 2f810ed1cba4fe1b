"""Long-lived MCP sessions, one per server, on the background event loop (orchestrator/core/aio.py).

Each server has a runner task that starts it (a child process over stdio, or an HTTP/SSE connection), holds one
`mcp.ClientSession` open for every call, and watches it. A server that fails to start, exits, writes something
that is not JSON-RPC on its stdout, or lets a call run past `timeout_s` is marked unhealthy with the reason and
restarted with exponential backoff (`mcp.restart_backoff_s` doubling up to `mcp.max_restart_backoff_s`); the
other servers are not touched. A call to an unhealthy server fails at once with a ToolError saying why, so the
planner gets an error ToolMessage, never an exception.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
import weakref
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import McpError, StdioServerParameters
from mcp import types as mt
from mcp.shared.session import RequestResponder

from integrations.base import ToolError

from orchestrator.core import secrets
from orchestrator.core.aio import background_loop, run_sync
from orchestrator.core.config import Settings
from .browser_pool import BrowserPool
from .config import LoadedServers, ServerConfig, expand, load_servers
from .http_bounds import bounded_client_factory
from .session import ValidatorCachingSession
from .stdio import bounded_stdio_client, rotate_log
from .server_state import (
    ServerRuntime, ServerStatus, State, current_task_or_none, describe_failure, list_all_tools, on_background_loop,
    shorten,
)

log = logging.getLogger(__name__)


class _NoSdkTracebacks(logging.Filter):
    """The MCP SDK logs every line a server writes that is not JSON-RPC as an error with its full traceback,
    which the CLI printed on its stderr. Jarvis reports the problem itself, once, in a sentence (the server's
    state and reason, `jarvis mcp status`), so the SDK's record is kept for --verbose only, without the trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.levelno >= logging.WARNING:
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


for _name in ("mcp.client.stdio", "mcp.client.session", "mcp.shared.session"):
    logging.getLogger(_name).addFilter(_NoSdkTracebacks())

_REQUEST_TIMEOUT = 408  # what the SDK raises when read_timeout_seconds passes
_CONNECTION_CLOSED = mt.CONNECTION_CLOSED


class _WatchedStream:
    """The transport's receive stream as the session reads it, reporting its end or an unparsable line at once
    (a thin wrapper rather than a forwarding task: no extra task switch per message)."""

    def __init__(self, inner: Any, on_garbage: Any, on_end: Any):
        self.inner = inner
        self.on_garbage = on_garbage
        self.on_end = on_end

    async def receive(self) -> Any:
        try:
            item = await self.inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.on_end()
            raise anyio.EndOfStream from None
        if isinstance(item, Exception):
            self.on_garbage(item)
        return item

    def __aiter__(self) -> "_WatchedStream":
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> "_WatchedStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class McpManager:
    """All configured MCP servers of one `mcp.dir`. Thread-safe: sync methods hop to the background loop."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.mcp_dir = Path(settings.mcp.dir)
        self.log_dir = settings.data_dir / "mcp"
        self._servers: dict[str, ServerRuntime] = {}
        self._config_errors: dict[str, str] = {}
        self._signature: tuple | None = None
        self._checked_at = 0.0
        self._lock = threading.Lock()
        self.listeners: list[Any] = []  # called with the server name when its tools change
        self.browsers = BrowserPool(self)  # a browser server's runs, one per task
        with _live_lock:
            _live.add(self)
        self.refresh_config(force=True)

    # -- configuration ------------------------------------------------------------------------------
    def _dir_signature(self) -> tuple:
        if not self.mcp_dir.is_dir():
            return ()
        return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in self.mcp_dir.glob("*.toml")))

    def refresh_config(self, force: bool = False) -> bool:
        """Re-read mcp.dir when a file was added, changed or removed (checked at most once a second)."""
        now = time.monotonic()
        if not force and now - self._checked_at < 1.0:
            return False
        self._checked_at = now
        signature = self._dir_signature()
        if signature == self._signature:
            return False
        loaded: LoadedServers = load_servers(self.mcp_dir)
        with self._lock:
            self._signature = signature
            self._config_errors = loaded.errors
            for name in list(self._servers):
                old = self._servers[name]
                new = loaded.servers.get(name)
                if new is None or new.model_dump() != old.cfg.model_dump():
                    self.browsers.stop_server(name)
                    self._stop_server(old)
                    del self._servers[name]
            for name, cfg in loaded.servers.items():
                if name not in self._servers:
                    srv = ServerRuntime(cfg)
                    srv.state = self._initial_state(cfg)
                    self._servers[name] = srv
        return True

    @staticmethod
    def _initial_state(cfg: ServerConfig) -> State:
        if not cfg.enabled:
            return State.DISABLED
        return State.UNAVAILABLE if cfg.availability() else State.STOPPED

    def configs(self) -> dict[str, ServerConfig]:
        return {name: srv.cfg for name, srv in self._servers.items()}

    # -- lifecycle ------------------------------------------------------------------------------------
    def ensure_started(self, wait_s: float = 0.0, names: list[str] | None = None) -> None:
        """Start the runner of every enabled, available server not running yet; optionally wait for them."""
        self.refresh_config()
        with self._lock:
            todo = [s for n, s in self._servers.items() if (names is None or n in names)
                    and s.state == State.STOPPED and s.task is None]
        on_loop = on_background_loop()
        for srv in todo:
            if on_loop:
                asyncio.get_running_loop().create_task(self._spawn(srv))
            else:
                run_sync(self._spawn(srv))
        if wait_s > 0 and not on_loop:
            targets = [s for n, s in self._servers.items() if names is None or n in names]
            run_sync(self._wait_first_attempts(targets, wait_s))

    async def _spawn(self, srv: ServerRuntime) -> None:
        if srv.task is None:
            srv.stopping = False
            srv.ready = asyncio.Event()
            srv.task = asyncio.get_running_loop().create_task(self._run(srv), name=f"mcp-{srv.cfg.name}")

    @staticmethod
    async def _wait_first_attempts(servers: list[ServerRuntime], timeout: float) -> None:
        events = [s.ready for s in servers if s.ready is not None]
        if events:
            await asyncio.wait([asyncio.ensure_future(e.wait()) for e in events], timeout=timeout)

    @staticmethod
    async def _stop_task(srv: ServerRuntime) -> None:
        if srv.trouble is not None:
            srv.trouble.set()
        if srv.wake is not None:
            srv.wake.set()  # a runner waiting out its backoff stops at once
        task = srv.task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=5)
        except (TimeoutError, Exception):  # noqa: BLE001
            task.cancel()

    def _stop_servers(self, servers: list[ServerRuntime]) -> None:
        """Stop runners (all at once: each may wait for its process to exit)."""
        running = [s for s in servers if s.task is not None and not s.task.done()]
        for srv in servers:
            srv.stopping = True
        if running:
            async def _stop_all() -> None:
                await asyncio.gather(*(self._stop_task(s) for s in running), return_exceptions=True)

            loop = background_loop()
            if on_background_loop():  # cannot block the loop that has to do the stopping
                loop.create_task(_stop_all())
            else:
                try:
                    asyncio.run_coroutine_threadsafe(_stop_all(), loop).result(15)
                except Exception:  # noqa: BLE001 - shutting down: nothing left to report to
                    pass
        for srv in servers:
            srv.task = None
            srv.session = None
            if srv.state not in (State.DISABLED, State.UNAVAILABLE):
                srv.state = State.STOPPED

    def _stop_server(self, srv: ServerRuntime) -> None:
        self._stop_servers([srv])

    def shutdown(self) -> None:
        self.browsers.stop_all()
        with self._lock:
            servers = list(self._servers.values())
        self._stop_servers(servers)

    async def _run(self, srv: ServerRuntime) -> None:
        """Start, serve, and restart with backoff until stopped."""
        cfg = self.settings.mcp
        backoff = cfg.restart_backoff_s
        while not srv.stopping:
            srv.state = State.STARTING
            started = time.monotonic()
            try:
                await self._session_lifetime(srv)
            except Exception as exc:  # noqa: BLE001 - any failure to start is a reason, not a crash
                srv.trouble_reason = srv.trouble_reason or describe_failure(exc, srv)
            srv.session = None
            if srv.ready is not None:
                srv.ready.set()
            if srv.stopping:
                break
            if time.monotonic() - started > 60:  # it ran fine for a while: start the backoff over
                backoff = cfg.restart_backoff_s
            srv.state = State.UNHEALTHY
            srv.last_error = srv.trouble_reason or "the server stopped"
            srv.restarts += 1
            srv.next_restart_at = time.monotonic() + backoff
            log.warning("MCP server %s is unhealthy (%s); restarting in %.1f s", srv.cfg.name, srv.last_error, backoff)
            srv.wake = asyncio.Event()
            try:
                await asyncio.wait_for(srv.wake.wait(), timeout=backoff)
            except TimeoutError:
                pass
            backoff = min(backoff * 2, cfg.max_restart_backoff_s)
        srv.next_restart_at = None
        srv.state = State.STOPPED

    async def _session_lifetime(self, srv: ServerRuntime) -> None:
        cfg = srv.cfg
        srv.trouble = asyncio.Event()
        srv.trouble_reason = None
        async with AsyncExitStack() as stack:
            read, write = await self._open_transport(srv, stack)
            # Watch what the transport reads, so a closed stream (the process exited) or a line that is not
            # JSON-RPC (garbage on stdout) is seen at once, not only by the next call.
            watched = _WatchedStream(
                read,
                on_garbage=lambda exc: self._trouble(
                    srv, srv.generation, f"it wrote something that is not JSON-RPC on its stdout ({shorten(str(exc), 160)})"),
                on_end=lambda: None if srv.stopping else self._trouble(
                    srv, srv.generation, "the server exited" + self._stderr_tail(srv)),
            )
            session = await stack.enter_async_context(
                ValidatorCachingSession(watched, write, message_handler=self._message_handler(srv))  # type: ignore[arg-type]
            )
            with anyio.fail_after(cfg.startup_timeout_s):
                await session.initialize()
                tools = await list_all_tools(session)
            srv.tools = tools
            srv.session = session
            srv.generation += 1
            srv.state = State.READY
            srv.last_error = None
            srv.next_restart_at = None
            if srv.ready is not None:
                srv.ready.set()
            self._notify(srv.cfg.name)
            log.info("MCP server %s ready with %d tools", cfg.name, len(tools))
            await srv.trouble.wait()
            srv.session = None

    async def _open_transport(self, srv: ServerRuntime, stack: AsyncExitStack) -> tuple[Any, Any]:
        cfg = srv.cfg
        if cfg.transport == "stdio":
            self.log_dir.mkdir(parents=True, exist_ok=True)
            srv.log_path = self.log_dir / f"{srv.label or cfg.name}.log"
            limits = self.settings.mcp
            rotate_log(srv.log_path, limits.max_log_mb * 1024 * 1024)
            errlog = stack.enter_context(open(srv.log_path, "a", encoding="utf-8"))  # the server's stderr
            errlog.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {cfg.command} {' '.join(cfg.args)}\n")
            errlog.flush()
            srv.log_offset = errlog.tell()
            data, here = self.settings.data_dir, self.mcp_dir
            folder = srv.browser_dir or data / "browser" / cfg.name
            env = {k: expand(secrets.resolve(v, what=f"{cfg.name} env {k}") or "", data, here, folder)
                   for k, v in cfg.env.items()}
            cwd = expand(cfg.cwd, data, here, folder) if cfg.cwd else None
            if cwd:
                Path(cwd).mkdir(parents=True, exist_ok=True)
            argv = [cfg.command or "", *(expand(a, data, here, folder) for a in cfg.args)]
            if srv.cgroup is not None:  # in its cgroup before it runs, so no child of it starts outside
                argv = srv.cgroup.wrap(argv)
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env or None, cwd=cwd)
            return await stack.enter_async_context(bounded_stdio_client(
                params, errlog, max_line_bytes=limits.max_message_mb * 1024 * 1024,
                max_log_bytes=limits.max_log_mb * 1024 * 1024))
        headers = {k: secrets.resolve(v, what=f"{cfg.name} header {k}") or "" for k, v in cfg.headers.items()}
        bounded = bounded_client_factory(self.settings.mcp.max_message_mb * 1024 * 1024)  # http_bounds.py
        if cfg.transport == "sse":
            from mcp.client.sse import sse_client

            return await stack.enter_async_context(sse_client(cfg.url or "", headers=headers or None,
                                                               timeout=cfg.startup_timeout_s,
                                                               httpx_client_factory=bounded))
        from mcp.client.streamable_http import streamablehttp_client

        read, write, _ = await stack.enter_async_context(
            streamablehttp_client(cfg.url or "", headers=headers or None, timeout=cfg.startup_timeout_s,
                                  httpx_client_factory=bounded))
        return read, write

    def _message_handler(self, srv: ServerRuntime):
        async def handle(message: Any) -> None:
            if isinstance(message, mt.ServerNotification) and isinstance(message.root, mt.ToolListChangedNotification):
                if srv.relisting is not None and not srv.relisting.done():
                    srv.relist_again = True  # one listing at a time: a flood of notices is one more listing
                elif srv.session is not None:
                    # Not awaited here: this handler runs inside the session's receive loop, which must go on to
                    # read the list's answer (Playwright MCP announces a change in the middle of a navigation, and
                    # awaiting the list hung that call until timeout_s).
                    task = asyncio.get_running_loop().create_task(self._relist(srv, srv.session))
                    srv.relisting = task  # a reference, so the task is not collected mid-way
            elif isinstance(message, Exception):
                log.debug("MCP server %s: %s", srv.cfg.name, message)
            elif isinstance(message, RequestResponder):
                pass  # sampling/elicitation are not offered; the SDK answers them with an error

        return handle

    async def _relist(self, srv: ServerRuntime, session: Any) -> None:
        while True:
            srv.relist_again = False
            try:
                with anyio.fail_after(srv.cfg.timeout_s):
                    tools = await list_all_tools(session)
            except Exception as exc:  # noqa: BLE001 - a session that went away meanwhile: its restart lists again
                log.warning("MCP server %s: listing its changed tools failed: %s", srv.cfg.name, exc)
                return
            if srv.session is session:
                srv.tools = tools
                self._notify(srv.cfg.name)
            if not srv.relist_again:
                return

    def _trouble(self, srv: ServerRuntime, generation: int, reason: str) -> None:
        """Mark the running session of `generation` as failed; its runner tears it down and restarts it."""
        if srv.generation != generation or srv.trouble is None or srv.trouble.is_set():
            return
        srv.trouble_reason = reason
        srv.last_error = reason
        srv.state = State.UNHEALTHY
        srv.trouble.set()
        current = current_task_or_none()
        for task in list(srv.inflight):
            if task is not current and not task.done():
                srv.killed.add(task)
                task.cancel()

    def _stderr_tail(self, srv: ServerRuntime) -> str:
        return stderr_tail(srv.log_path, srv.log_offset)

    def _notify(self, name: str) -> None:
        for listener in list(self.listeners):
            try:
                listener(name)
            except Exception:  # noqa: BLE001
                log.debug("MCP listener failed", exc_info=True)

    # -- calls ------------------------------------------------------------------------------------------
    async def call_tool(self, server: str, tool: str, arguments: dict[str, Any] | None,
                        progress_callback: Any = None, task: tuple[str, str | None] | None = None) -> mt.CallToolResult:
        """One tool call on the server's live session (background loop). Failures raise ToolError. `task`
        (thread id, task): on a browser server, the call goes to that task's own browser (mcp/browser_pool.py)."""
        srv = self._servers.get(server)
        if srv is None:
            raise ToolError(f"there is no MCP server named {server!r} (see `jarvis mcp status`)")
        if task is not None and srv.cfg.browser is not None and srv.state not in (
                State.DISABLED, State.UNAVAILABLE, State.BROKEN):
            async with self.browsers.use(srv, task) as run:
                return await self.call_runtime(run, tool, arguments, progress_callback)
        return await self.call_runtime(srv, tool, arguments, progress_callback)

    async def call_runtime(self, srv: ServerRuntime, tool: str, arguments: dict[str, Any] | None,
                           progress_callback: Any = None) -> mt.CallToolResult:
        """One tool call on this run of a server (the configured one, or a task's browser)."""
        server = srv.cfg.name
        if srv.browser_dir is not None and srv.stopping:  # a task's browser closed meanwhile: never started again
            raise ToolError(f"this task's browser on the MCP server {server} was closed (its task ended, or it was "
                            "idle too long); call the tool again to get a new browser")
        if srv.state in (State.STOPPED,) and srv.task is None:
            await self._spawn(srv)
        if srv.state in (State.DISABLED, State.UNAVAILABLE, State.BROKEN):
            raise ToolError(f"the MCP server {server} is {srv.state.value}: {self.reason(server)}")
        starting = srv.state == State.STARTING or (srv.state == State.STOPPED and srv.task is not None)  # just spawned
        if starting and srv.ready is not None:
            try:
                await asyncio.wait_for(srv.ready.wait(), timeout=srv.cfg.startup_timeout_s)
            except TimeoutError:
                pass
        session, generation = srv.session, srv.generation
        if srv.state != State.READY or session is None:
            when = ""
            if srv.next_restart_at is not None:
                when = f"; it restarts in {max(0.0, srv.next_restart_at - time.monotonic()):.0f} s"
            raise ToolError(f"the MCP server {server} is not available ({srv.last_error or srv.state.value}){when}. "
                            "Try again later or use another tool; `jarvis mcp status` shows the details.")
        timeout = srv.cfg.timeout_s
        # A session that fails (the process exits, garbage on stdout) cancels the calls in flight at once, so
        # a dead server never costs a timeout; no extra task per call.
        task = asyncio.current_task()
        srv.inflight.add(task)  # type: ignore[arg-type]
        try:
            return await session.call_tool(tool, arguments or {}, progress_callback=progress_callback,
                                           read_timeout_seconds=timedelta(seconds=timeout))
        except asyncio.CancelledError:
            if task not in srv.killed:
                raise
            srv.killed.discard(task)  # type: ignore[arg-type]
            task.uncancel()  # type: ignore[union-attr]
            reason = srv.trouble_reason or "the server stopped"
            raise ToolError(f"the MCP server {server} failed during {tool}: {reason}; it is being restarted") from None
        except McpError as exc:
            code = exc.error.code
            if code == _REQUEST_TIMEOUT:
                reason = f"{tool} did not answer within {timeout:g} s (timeout_s)"
                self._trouble(srv, generation, reason)
                raise ToolError(f"the MCP server {server} timed out: {reason}; it is being restarted") from None
            if code == _CONNECTION_CLOSED:
                await asyncio.sleep(0)  # let the forwarder record why the connection closed
                reason = srv.trouble_reason or "the server exited during the call"
                self._trouble(srv, generation, reason)
                raise ToolError(f"the MCP server {server} failed during {tool}: {reason}; it is being restarted") from None
            raise ToolError(f"the MCP server {server} refused {tool}: {exc.error.message}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            reason = srv.trouble_reason or f"its connection closed ({type(exc).__name__})"
            self._trouble(srv, generation, reason)
            raise ToolError(f"the MCP server {server} failed during {tool}: {reason}; it is being restarted") from None
        finally:
            srv.inflight.discard(task)  # type: ignore[arg-type]

    # -- inspection -----------------------------------------------------------------------------------
    def reason(self, name: str) -> str | None:
        srv = self._servers.get(name)
        if srv is None:
            return self._config_errors.get(name)
        if srv.state == State.DISABLED:
            return f"enabled = false in {srv.cfg.source}"
        if srv.state == State.UNAVAILABLE:
            return srv.cfg.availability()
        return srv.last_error

    def ready_servers(self) -> list[tuple[ServerConfig, list[mt.Tool], int]]:
        """(config, tools, generation) of every server with a live session."""
        with self._lock:
            return [(s.cfg, list(s.tools), s.generation) for s in self._servers.values() if s.state == State.READY]

    def tools_of(self, name: str) -> list[mt.Tool]:
        srv = self._servers.get(name)
        return list(srv.tools) if srv is not None else []

    def state_of(self, name: str) -> State | None:
        srv = self._servers.get(name)
        return srv.state if srv is not None else None

    def status(self) -> list[ServerStatus]:
        self.refresh_config()
        out: list[ServerStatus] = []
        with self._lock:
            servers = list(self._servers.values())
        for srv in servers:
            nxt = srv.next_restart_at
            out.append(ServerStatus(
                name=srv.cfg.name, state=srv.state.value, tools=len(srv.tools) if srv.state == State.READY else 0,
                last_error=self.reason(srv.cfg.name) if srv.state != State.READY else None, restarts=srv.restarts,
                description=srv.cfg.description, source=str(srv.cfg.source) if srv.cfg.source else None,
                next_restart_in_s=round(max(0.0, nxt - time.monotonic()), 1) if nxt is not None else None,
                log_file=str(srv.log_path) if srv.log_path else None,
                note=self.browsers.memory_note(srv.cfg) if srv.cfg.browser is not None else None,
            ))
        for name, error in self._config_errors.items():
            out.append(ServerStatus(name=name, state=State.BROKEN.value, tools=0, last_error=error, restarts=0))
        return sorted(out, key=lambda s: s.name)


# -- stopping every server at exit ------------------------------------------------------------------------
# Managers belong to their App; this only remembers the live ones (weakly, handing none out) so that the servers
# they started are stopped when the process exits, and between tests.
_live: weakref.WeakSet[McpManager] = weakref.WeakSet()
_live_lock = threading.Lock()


@atexit.register
def shutdown_all() -> None:
    """Stop every server of every manager of this process (at exit, and between tests)."""
    with _live_lock:
        managers = list(_live)
    for manager in managers:
        try:
            manager.shutdown()
        except Exception:  # noqa: BLE001
            pass


def stderr_tail(log_path: Path | None, offset: int = 0, lines: int = 3, budget: int = 64 * 1024) -> str:
    """The last lines a server's run wrote on stderr, from `offset` on (an earlier run's lines are not this
    run's), read with a byte budget."""
    if log_path is None or not log_path.exists():
        return ""
    try:
        with open(log_path, "rb") as fh:
            end = fh.seek(0, 2)
            fh.seek(max(offset, end - budget))
            text = fh.read(budget).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    tail = [line for line in text if line.strip() and not line.startswith("--- ")][-lines:]
    return f" (stderr: {shorten(' | '.join(tail), 300)})" if tail else ""
