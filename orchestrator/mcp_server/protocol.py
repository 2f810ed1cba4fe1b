"""Jarvis's MCP server on the MCP SDK's own server side (the low-level `Server`), over its two transports.

- stdio (`jarvis mcp serve`): the client that starts the process is the client whose token is in
  `JARVIS_MCP_TOKEN` (checked at start: a revoked token starts nothing); its calls are rate limited here.
- streamable HTTP, mounted at `mcp_server.path` of `jarvis run`'s app (server/app.py), JSON answers, sessions
  kept: the SDK serves a session only to the credential that opened it (`AuthenticatedUser`, the client's name
  here), so a session opened with one client's token is "not found" with another's. Host
  and Origin are checked first by the server's own guard (server/security.py, against DNS rebinding and pages on
  other origins); then `McpHttp` takes the client's bearer token (clients.py) instead of the UI's token, and
  refuses a client past `mcp_server.calls_per_minute` (429) before reading its request.

What each call does, and under which rules, is offer.py's; this module only speaks the protocol.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents

from orchestrator.channels.ratelimit import TokenBucket
from .clients import ClientStore, digest
from .offer import McpOffer, Refused

log = logging.getLogger(__name__)

CLIENT_KEY = "jarvis.mcp_client"  # set in the request's ASGI scope by McpHttp, read by the handlers
INSTRUCTIONS = ("Jarvis is the user's own assistant. Every call here runs under the user's rules in Jarvis: "
                "anything with an effect waits for the user's approval in Jarvis, never here.")


class Limits:
    """One token bucket per client, `per_minute` calls; a call past it is refused at once, not queued."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._buckets: dict[str, TokenBucket] = {}

    def allow(self, client: str) -> bool:
        bucket = self._buckets.setdefault(client, TokenBucket(self.per_minute))
        return bucket.acquire(timeout=0)


def build_server(offer: McpOffer, store: ClientStore, client_of: Callable[[Server], str],
                 limits: Limits | None = None) -> Server:
    """The protocol handlers over `offer`. `client_of(server)`: the calling client of the current request;
    `limits`: checked per tool call (stdio; HTTP checks per request before this)."""
    server: Server = Server("jarvis", instructions=INSTRUCTIONS)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        offered = await anyio.to_thread.run_sync(offer.tools)
        return [types.Tool(name=t.name, description=t.description, inputSchema=t.schema,
                           annotations=types.ToolAnnotations(readOnlyHint=t.read_only)) for t in offered]

    @server.call_tool(validate_input=False)  # offer.call checks them against the schema listed, its validator kept
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        try:
            client = client_of(server)
        except Refused as exc:
            return _error(str(exc))
        if limits is not None and not limits.allow(client):
            return _error(f"too many calls: at most {limits.per_minute} a minute")
        try:
            text = await anyio.to_thread.run_sync(_recorded, offer, store, client, name, arguments,
                                                  abandon_on_cancel=True)
        except Refused as exc:
            return _error(str(exc))
        return [types.TextContent(type="text", text=text)]

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        found = await anyio.to_thread.run_sync(offer.resources)
        return [types.Resource(uri=r["uri"], name=r["name"], description=r["description"], mimeType="text/plain")
                for r in found]

    @server.read_resource()
    async def read_resource(uri: Any) -> list[ReadResourceContents]:
        client = client_of(server)
        if limits is not None and not limits.allow(client):
            raise ValueError(f"too many calls: at most {limits.per_minute} a minute")
        try:
            text = await anyio.to_thread.run_sync(offer.read_resource, str(uri))
        except Refused as exc:
            store.record(client, f"resource {uri}", f"refused: {exc}")
            raise ValueError(str(exc)) from None
        store.record(client, f"resource {uri}", "ok")
        return [ReadResourceContents(content=text, mime_type="text/plain")]

    return server


def _recorded(offer: McpOffer, store: ClientStore, client: str, name: str, arguments: dict[str, Any]) -> str:
    """The call and its line in the client's record, both on the worker thread: the record's write to disk stays
    off the event loop."""
    try:
        text = offer.call(client, name, arguments)
    except Refused as exc:
        store.record(client, name, f"refused: {exc}")
        raise
    store.record(client, name, "ok")
    return text


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


def http_client(server: Server) -> str:
    request = server.request_context.request
    client = getattr(request, "scope", {}).get(CLIENT_KEY) if request is not None else None
    if not client:
        raise RuntimeError("an MCP request reached Jarvis without a client")  # McpHttp sets it on every request
    return client


class McpHttp:
    """The ASGI endpoint of the streamable HTTP transport; `lifespan()` must be entered by the app's lifespan."""

    def __init__(self, offer: McpOffer, store: ClientStore):
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.store = store
        self.limits = Limits(offer.config.calls_per_minute)
        self.server = build_server(offer, store, http_client)
        # Sessions are kept (a warm client's call is one POST to its session); the SDK serves a session only to
        # the credential that opened it, which McpHttp gives as the request's user: the client's name.
        self.manager = StreamableHTTPSessionManager(app=self.server, json_response=True)

    def lifespan(self) -> Any:
        return self.manager.run()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        client = self.store.who(token)
        if client is None:
            await _answer(send, 401, "missing, wrong or revoked MCP client token (jarvis mcp clients add NAME)",
                          [(b"www-authenticate", b'Bearer realm="jarvis-mcp"')])
            return
        if not self.limits.allow(client):
            await _answer(send, 429, f"too many requests: at most {self.limits.per_minute} a minute",
                          [(b"retry-after", b"60")])
            return
        user = AuthenticatedUser(AccessToken(token=digest(token or ""), client_id=client, scopes=[]))
        await self.manager.handle_request({**scope, CLIENT_KEY: client, "user": user}, receive, send)


async def _answer(send: Any, status: int, message: str, extra: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})


async def serve_stdio(offer: McpOffer, store: ClientStore, token: str) -> None:
    """Serve the client whose token is `token` over stdin/stdout until it closes them. The token is checked on
    every call, as HTTP's is: a client revoked while its process runs gets nothing more."""
    from mcp.server.stdio import stdio_server

    def client_of(_server: Server) -> str:
        client = store.who(token)
        if client is None:
            raise Refused("this client's token was revoked (jarvis mcp clients)")
        return client

    server = build_server(offer, store, client_of, Limits(offer.config.calls_per_minute))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
