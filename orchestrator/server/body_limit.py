"""Bounded request bodies: an API request larger than `server.max_request_kb` is refused before it is read.

Starlette reads a whole JSON body into memory before validating it, and FastAPI's 422 answer quoted the value
it refused: a 60 MB message was read, held twice and sent back. Now a body announced larger than the limit gets
413 at once, one sent in chunks is cut off at the limit, and validation errors name the field and the rule
without quoting the input. A JSON body nested more than json_bounds.MAX_DEPTH levels gets 400 saying so before
it is parsed. Uploads (POST /api/uploads) have their own limit, `server.max_upload_mb`, checked by
their endpoint while streaming to disk; recordings (POST /api/transcribe) `voice.max_audio_mb`.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from orchestrator.core import json_bounds

UNBOUNDED_PREFIXES = ("/api/uploads", "/api/transcribe")  # each bounds its own body while streaming


class BodyLimitMiddleware:
    """Pure ASGI middleware: 413 for an /api/ request body over `limit_bytes` (streaming responses untouched)."""

    def __init__(self, app: Any, limit_of: Any):
        self.app = app
        self.limit_of = limit_of  # () -> bytes; read per request, so a test can change the settings

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/api/") or path.startswith(UNBOUNDED_PREFIXES):
            await self.app(scope, receive, send)
            return
        limit = self.limit_of()
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _refuse(send, 413, _too_large(limit))
            return
        seen = 0
        refusal: tuple[int, str] | None = None  # the app got a truncated body, and its answer is replaced by this
        received: list[bytes] = []  # the body (JSON: FastAPI parses one without a content type too), kept to
        # check its nesting once it is whole

        async def counted_receive() -> dict[str, Any]:
            nonlocal seen, refusal
            if refusal is not None:
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refusal = (413, _too_large(limit))
                else:
                    received.append(message.get("body", b""))
                    if not message.get("more_body") and json_bounds.too_deep(b"".join(received)):
                        # Python's parser recurses per level: 100,000 levels were a RecursionError, answered
                        # "There was an error parsing the body" without saying what was wrong.
                        refusal = (400, f"The request's JSON is nested more than {json_bounds.MAX_DEPTH} levels "
                                        "deep; no request of this API needs that many: send it flatter.")
                if refusal is not None:
                    # A NUL where the body was cut: the first bytes alone may be a whole JSON document (then
                    # blanks), which the app would act on before its answer is replaced; with the NUL it cannot.
                    return {"type": "http.request", "body": b"\x00", "more_body": False}
            return message

        async def watched_send(message: dict[str, Any]) -> None:
            if refusal is None:
                await send(message)
            elif message["type"] == "http.response.start":
                await _refuse(send, *refusal)  # instead of whatever the app made of a truncated body

        await self.app(scope, counted_receive, watched_send)


def _too_large(limit: int) -> str:
    return (f"The request is larger than {limit // 1024} KB (server.max_request_kb in the config); files go "
            "through an upload (POST /api/uploads).")


async def _refuse(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def validation_failed(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each field and rule, without quoting the value refused (it can be megabytes, or a secret)."""
    errors = [{k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in exc.errors()]
    return JSONResponse({"detail": errors}, status_code=422)
