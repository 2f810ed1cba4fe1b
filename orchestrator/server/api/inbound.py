"""POST /api/inbound: a message from the world (a webhook, a bridge, the UI answering as a counterpart on the
`local` channel), routed by the switchboard to the jorb it belongs to, or kept in the inbox.

    {"channel": "local", "sender": "@magicapp", "text": "...", "jorb_id": null, "thread_key": null}
    -> {"jorb_id": "...", "status": "routed", "reasoning": "..."}

A routed message wakes its jorb after `channels.burst_window_s` of quiet, so a burst wakes it once.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from orchestrator.channels.base import MAX_INBOUND_CHARS
from orchestrator.channels.inbound import InboundMessage
from orchestrator.jorbs.store import JorbNotFound
from . import AppContext, app_context

router = APIRouter()


class InboundIn(BaseModel):
    channel: str = Field(..., min_length=1, max_length=32, pattern=r"^[a-z0-9_-]+$")
    sender: str = Field(..., min_length=1, max_length=256)
    text: str = Field(..., min_length=1, max_length=MAX_INBOUND_CHARS)
    jorb_id: str | None = Field(None, max_length=32)
    thread_key: str | None = Field(None, max_length=256)
    external_id: str | None = Field(None, max_length=256)


@router.post("/inbound")
def inbound(body: InboundIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    if not body.text.strip():
        raise HTTPException(400, "The message is empty.")
    try:
        message = InboundMessage(body.channel, body.sender, body.text, jorb_id=body.jorb_id or None,
                                 thread_key=body.thread_key or None, external_id=body.external_id)
        route = ctx.app.jorbs.inbound(message, background=True, debounce=True)
    except JorbNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    return {"jorb_id": route.jorb_id, "status": route.status, "reasoning": route.reasoning,
            "confidence": route.confidence, "flags": route.flags, "is_user": route.is_user}


ROUTER = router
