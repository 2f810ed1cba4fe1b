"""Server-sent events from a LiveTurn (the browser reads them with fetch + a stream reader, since a POST
cannot use EventSource)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse


def encode(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, default=str, ensure_ascii=False)
    return f"event: {event.get('event', 'message')}\ndata: {data}\n\n".encode()


async def _frames(thread_id: str, events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    yield encode({"event": "start", "thread_id": thread_id})
    async for event in events:
        yield encode(event)
    yield encode({"event": "end", "thread_id": thread_id})


def sse_response(thread_id: str, events: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    return StreamingResponse(
        _frames(thread_id, events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
