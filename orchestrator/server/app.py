"""The local web UI and its JSON API, in one FastAPI app served by uvicorn (`jarvis run`).

    /                 the UI (orchestrator/server/web/index.html), no data, served without the token; the page
                      takes `/?token=...` into its tab and sends it as a header (server/security.py)
    /static/...       the UI's own JS/CSS (no data, served without the token)
    /api/views        which tabs exist (one per module of orchestrator/server/api exporting VIEW)
    /api/...          the views' routers (orchestrator/server/api/*.py); /api/health the health report
    /healthz          up or down, without the token (for whatever watches the service)
    /identity         without the token: proves this server holds the data folder's token (core/server_identity.py)
    /mcp              Jarvis's MCP server (mcp_server.path, when mcp_server.enabled): each client's own token

Security (server_security.py): token on every call, Host and Origin checked, loopback by default.
Background services (services.py) start with the app and stop with it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import SQLAlchemyError

from .api import AppContext, app_context, discover
from .body_limit import BodyLimitMiddleware, validation_failed
from orchestrator.core.disk_full import disk_full_message, is_disk_full
from orchestrator.app import App
from .health import alive, record_error
from .listen import bind_socket, uvicorn_server  # noqa: F401 - bind_socket re-exported for the tests and benches
from .markdown import render_markdown
from orchestrator.chat.turn_events import Done, from_wire
from orchestrator.core.secrets import redact
from orchestrator.core.server_identity import CHALLENGE_LENGTHS, IDENTITY_PATH, proof
from .security import Guard, GuardMiddleware, load_or_create_token
from .services import ServiceContext, ServiceManager

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parent / "web"


def decorate_event(event: dict[str, Any]) -> dict[str, Any]:
    """Server-side additions to turn events: the final answer as sanitized HTML."""
    typed = from_wire(event)
    if isinstance(typed, Done):
        return {**event, "html": render_markdown(typed.content or "")}
    return event


STORAGE_ERRORS = (SQLAlchemyError, sqlite3.Error, OSError)


async def _storage_failed(request: Request, exc: Exception) -> JSONResponse:
    """A database or file write that failed: a full disk gets 507 and what to do (the UI shows it and gives
    the user's words back); anything else a 500 that names the error, logged with its traceback."""
    record_error("storage", f"{request.method} {request.url.path}: {type(exc).__name__}: {exc}")
    if is_disk_full(exc):
        log.error("%s %s: the disk is full (%s)", request.method, request.url.path, exc)
        return JSONResponse({"detail": disk_full_message("this request could not be saved")}, status_code=507)
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return JSONResponse({"detail": f"Jarvis could not do this: {type(exc).__name__}: {redact(str(exc))[:300]}"},
                        status_code=500)


def create_app(
    jarvis: App,
    *,
    token: str | None = None,
    services: list[str] | None = None,
) -> FastAPI:
    """The web app over `jarvis`, the process's App; `services` default to services.SERVICE_FACTORIES.
    Call `bind_port(app, port)` before serving so the Host/Origin checks know the address."""
    settings = jarvis.settings
    token = token or load_or_create_token(settings)
    hub = jarvis.turn_hub(decorate_event)  # the App's: a phone's answer starts its turns there too
    manager = ServiceManager(services)
    ctx = AppContext(app=jarvis, turns=hub, services=manager)
    mcp = _mcp_endpoint(jarvis, hub)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await manager.start_all(ServiceContext(app=jarvis, turns=hub, extras=ctx.extras))
        try:
            async with AsyncExitStack() as stack:
                if mcp is not None:
                    await stack.enter_async_context(mcp.lifespan())
                yield
        finally:
            await manager.stop_all()
            await asyncio.to_thread(hub.wait_all, 5.0)

    app = _App(title="Jarvis", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.jarvis = ctx
    app.state.token = token
    app.state.guard = None

    def guard_of() -> Guard:
        if app.state.guard is None:
            bind_port(app, settings.server.port)
        return app.state.guard

    # Added after the guard, so it runs inside it: a request without the token is refused before its size matters.
    app.add_middleware(BodyLimitMiddleware, limit_of=lambda: settings.server.max_request_kb * 1024)
    app.add_middleware(GuardMiddleware, guard_of=guard_of)
    app.add_exception_handler(RequestValidationError, validation_failed)
    for storage_error in STORAGE_ERRORS:
        app.add_exception_handler(storage_error, _storage_failed)

    views, routers = discover()
    shown = [v for v in views if _available(v, ctx)]
    for view in shown:
        if view.router is not None:
            app.include_router(view.router, prefix="/api")
    for router in routers:
        app.include_router(router, prefix="/api")

    @app.get("/api/views")
    def list_views(ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
        return [v.describe() for v in shown]

    @app.get("/healthz")
    def healthz() -> JSONResponse:  # no token (security.PUBLIC_PATHS): up or down only
        up = alive(settings)
        return JSONResponse({"service": "jarvis", "status": "up" if up else "down"}, status_code=200 if up else 503)

    @app.get(IDENTITY_PATH)
    def identity(request: Request, challenge: str = Query(..., min_length=CHALLENGE_LENGTHS[0],
                                                          max_length=CHALLENGE_LENGTHS[1])) -> dict[str, str]:
        """No token (security.PUBLIC_PATHS): proves to a command of this data folder that this is its Jarvis, on
        the port this server's own socket listens on."""
        port = (request.scope.get("server") or ("", 0))[1] or 0
        return {"service": "jarvis", "proof": proof(token, challenge, int(port))}

    @app.get("/")
    def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", headers={"Cache-Control": "no-store"})

    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
    if mcp is not None:
        # Host, Origin and Sec-Fetch-Site checked as for the API; the client's own token checked by McpHttp
        path = settings.mcp_server.path
        app.mcp_first = (path, GuardMiddleware(mcp, guard_of=guard_of, own_tokens=(path,)))
    return app


class _App(FastAPI):
    """The web app, with Jarvis's MCP endpoint (`mcp_first`: its path and its guarded ASGI app) answered ahead of
    the UI's middleware stack: none of that stack applies to it (the UI's token, /api/ body limits, the API's error
    handlers, route matching), and going through it was about 7% of the event loop's time per MCP call (profiled
    under bench/mcp_server.py). The SDK bounds the endpoint's request bodies itself."""

    mcp_first: tuple[str, Any] | None = None

    def build_middleware_stack(self) -> Any:
        rest = super().build_middleware_stack()
        if self.mcp_first is None:
            return rest
        path, endpoint = self.mcp_first

        async def dispatch(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == path:
                await endpoint(scope, receive, send)
            else:
                await rest(scope, receive, send)

        return dispatch


def _mcp_endpoint(jarvis: App, hub: Any) -> Any:
    """Jarvis's own MCP server (streamable HTTP) when `mcp_server.enabled`; each client's token, not the UI's."""
    if not jarvis.settings.mcp_server.enabled:
        return None
    from orchestrator.mcp_server.clients import ClientStore
    from orchestrator.mcp_server.offer import McpOffer
    from orchestrator.mcp_server.protocol import McpHttp

    return McpHttp(McpOffer(jarvis, hub), ClientStore(jarvis.settings))


def _available(view: Any, ctx: AppContext) -> bool:
    try:
        return bool(view.available(ctx))
    except Exception:  # noqa: BLE001 - a view whose check fails is left out, the others stay
        log.exception("view %s could not tell whether it is available", view.name)
        return False


def bind_port(app: FastAPI, port: int) -> None:
    ctx: AppContext = app.state.jarvis
    ctx.extras["port"] = port
    app.state.guard = Guard(ctx.settings, app.state.token, port)


def make_server(app: FastAPI, sock: socket.socket):
    bind_port(app, sock.getsockname()[1])
    return uvicorn_server(app)


@contextmanager
def serve_in_thread(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve the app from a background thread (tests, benchmarks); yields the base URL."""
    import time

    sock = bind_socket(host, port)
    server = make_server(app, sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="jarvis-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the Jarvis server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
