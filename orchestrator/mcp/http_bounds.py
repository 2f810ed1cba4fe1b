"""The HTTP transports of MCP servers (streamable HTTP, SSE), with what Jarvis keeps of an answer bounded.

The SDK reads a streamable-HTTP answer whole (`response.aread()`) and an SSE stream event by event, with no
limit: one answer or one event of any size was held in Jarvis's memory. As on stdio (`stdio.py`), a run of
bytes without a line break longer than `mcp.max_message_mb` (a JSON answer, an SSE data line) ends the read with
an error naming the limit; the manager then marks the server unhealthy and restarts it. A long-lived SSE stream
of many small events is not cut: only a line counts.

The client is made as the SDK's `create_mcp_http_client` makes it (its default timeouts, headers and auth), with a
transport that counts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from orchestrator.core.owned_transport import OwnedAsyncTransport


class MessageTooLong(httpx.ReadError):
    pass


class _LineBoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int):
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        run = 0  # bytes since the last line break
        async for chunk in self.inner:
            end = chunk.rfind(b"\n")
            run = len(chunk) - end - 1 if end >= 0 else run + len(chunk)
            if run > self.limit:
                raise MessageTooLong(f"the server sent a message longer than {self.limit // (1024 * 1024)} MB "
                                     "without a line break (mcp.max_message_mb): not kept")
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class _BoundedTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, limit: int):
        self.inner = inner
        self.limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        response.stream = _LineBoundedStream(response.stream, self.limit)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def bounded_client_factory(max_line_bytes: int):
    """An `httpx_client_factory` for the SDK's HTTP transports whose answers are read under `max_line_bytes`."""

    def factory(headers: dict[str, str] | None = None, timeout: httpx.Timeout | None = None,
                auth: httpx.Auth | None = None, **_: Any) -> httpx.AsyncClient:
        kwargs: dict[str, Any] = {"timeout": timeout or httpx.Timeout(MCP_DEFAULT_TIMEOUT,
                                                                       read=MCP_DEFAULT_SSE_READ_TIMEOUT)}
        if headers is not None:
            kwargs["headers"] = headers
        if auth is not None:
            kwargs["auth"] = auth
        # an MCP server on this machine must be this user's: another user could serve its port while it is down
        return httpx.AsyncClient(transport=_BoundedTransport(OwnedAsyncTransport(), max_line_bytes), **kwargs)

    return factory
