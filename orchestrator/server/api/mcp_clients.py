"""The MCP clients of Jarvis's own MCP server in the Settings view (the same as `jarvis mcp clients`):
GET /api/mcp/clients (each client, its calls, whether the server is on), POST /api/mcp/clients (a new client: its
token is in the answer once, inside the `mcpServers` lines to paste) and DELETE /api/mcp/clients/{name} (revoked:
its token stops working at its next request). Behind the UI's own token and origin checks, like every API call."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from orchestrator.mcp_server.clients import ClientError, ClientStore, client_config
from . import AppContext, app_context

ROUTER = APIRouter()


class ClientIn(BaseModel):
    name: str = Field(..., max_length=32)


@ROUTER.get("/mcp/clients")
def list_clients(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    rows = ClientStore(ctx.settings).list()
    return {"enabled": ctx.settings.mcp_server.enabled, "path": ctx.settings.mcp_server.path,
            "clients": [{"name": c.name, "created": c.created, "calls": c.calls, "last_call": c.last_call}
                        for c in rows]}


@ROUTER.post("/mcp/clients")
def add_client(body: ClientIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    try:
        token = ClientStore(ctx.settings).add(body.name)
    except ClientError as exc:
        raise HTTPException(400, str(exc)) from None
    return {"name": body.name, "config": client_config(ctx.settings, token, ctx.extras.get("port"))}


@ROUTER.delete("/mcp/clients/{name}")
def revoke_client(name: str, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    try:
        ClientStore(ctx.settings).revoke(name)
    except ClientError as exc:
        raise HTTPException(404, str(exc)) from None
    return {"revoked": name}
