"""The app langgraph.json's `http.app` names, for its middleware only: the Host/Origin rule of platform_auth.py on
EVERY path of LangGraph's own server (`langgraph dev`).

The auth handler (platform_auth.py) runs only for the routes the platform protects. The routes it mounts itself
are outside it: `POST /internal/truncate` wipes every thread and checkpoint, `/internal/debug/thread/{id}` reads a
thread, and `/deploy` starts `langgraph deploy` for any Origin on localhost (a page on another port of this host).
The middleware of an `http.app` wraps the whole server, the platform's CORS included, so a refused preflight is
refused here too. A refused request gets 403 and reaches no route.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware

from orchestrator.platform_auth import refusal

log = logging.getLogger(__name__)


class PlatformGuard:
    """Pure ASGI middleware: refuses an HTTP or WebSocket request platform_auth.refusal refuses."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for key, value in scope.get("headers", []):
            headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        why = refusal(headers.get("host"), headers.get("origin"), headers.get("sec-fetch-site"))
        if why is None:
            await self.app(scope, receive, send)
            return
        log.warning("refused %s %s: %s", scope.get("method", "websocket"), scope.get("path", ""), why)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"detail": why}).encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


app = Starlette(middleware=[Middleware(PlatformGuard)])
