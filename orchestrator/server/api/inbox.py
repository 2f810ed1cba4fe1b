"""The Inbox view: inbound messages no jorb claimed (unmatched, ambiguous, low confidence, spam) with the
switchboard's reasoning, and what jorbs sent on the `local` channel (the user answers those as the counterpart
through POST /api/inbound).

  GET  /api/inbox                       {"messages", "local", "jorbs"}
  POST /api/inbox/{id}/assign           {"jorb_id"}: deliver the message to that jorb, like a reply
  POST /api/inbox/{id}/new-jorb         {"name", "plan", "autonomy", "approve_autonomy"}: the sender becomes its contact
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path
from pydantic import BaseModel, Field

from orchestrator.core.config import Mode
from orchestrator.jorbs.schema import OPEN_STATUSES, JorbStatus
from . import AppContext, View, app_context
from .jorbs import JorbIn, call, service, start_jorb

router = APIRouter()

UNCLAIMED = ("unmatched", "ambiguous", "low_confidence", "spam")


@router.get("/inbox")
def inbox(limit: int = 200, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    svc = service(ctx)
    limit = max(1, min(limit, 1000))
    messages = [m.as_dict() for m in reversed(svc.store.messages(statuses=UNCLAIMED, direction="in", limit=limit))]
    jorbs = {r.id: r for r in svc.list()}
    local = []
    for m in reversed(svc.store.messages(direction="out", limit=limit)):
        if m.channel != "local":
            continue
        row = jorbs.get(m.jorb_id) if m.jorb_id else None
        if m.jorb_id and row is None:
            try:
                row = svc.store.get(m.jorb_id)
            except LookupError:
                row = None
        local.append({**m.as_dict(), "jorb_name": row.name if row else None, "jorb_status": row.status if row else None,
                      "awaited": bool(row and row.status == JorbStatus.AWAITING_REPLY and row.waiting_party == m.party)})
    open_jorbs = [{"id": r.id, "name": r.name, "status": r.status, "contacts": r.contacts}
                  for r in jorbs.values() if r.status in OPEN_STATUSES]
    return {"messages": messages, "local": local, "jorbs": open_jorbs}


MessageId = Path(ge=1, description="an inbox message id")


def _unclaimed(ctx: AppContext, message_id: int) -> Any:
    msg = service(ctx).store.message(message_id)
    if msg is None or msg.direction != "in":
        raise HTTPException(404, f"There is no inbound message #{message_id}; reload the inbox.")
    if msg.status not in UNCLAIMED:
        where = f" to jorb {msg.jorb_id}" if msg.jorb_id else ""
        raise HTTPException(409, f"Message #{message_id} was already {msg.status}{where}; reload the inbox.")
    return msg


class AssignIn(BaseModel):
    jorb_id: str = Field(..., min_length=1, max_length=32)


@router.post("/inbox/{message_id}/assign")
def assign(body: AssignIn, message_id: int = MessageId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    msg = _unclaimed(ctx, message_id)
    svc = service(ctx)
    row = call(svc.store.get, body.jorb_id)
    if row.status not in OPEN_STATUSES:
        raise HTTPException(400, f"Jorb {row.id} is {row.status}; it takes no more messages. Start a new jorb instead.")
    call(svc.reply, row.id, msg.text, party=msg.party, channel=msg.channel, is_user=bool(msg.is_user), background=True,
         reasoning=f"assigned by you from the inbox (was {msg.status}: {msg.reasoning or 'no reasoning'})")
    svc.store.set_message(message_id, status="assigned", jorb_id=row.id)
    return {"message_id": message_id, "jorb_id": row.id, "status": "assigned"}


class NewJorbIn(BaseModel):
    name: str = Field(..., min_length=1, max_length=200)
    plan: str | None = Field(None, max_length=20_000)
    autonomy: dict[str, Mode] = Field(default_factory=dict)
    approve_autonomy: bool = False


@router.post("/inbox/{message_id}/new-jorb", status_code=201)
def new_jorb(body: NewJorbIn, message_id: int = MessageId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    msg = _unclaimed(ctx, message_id)
    plan = (body.plan or "").strip()
    # without a plan of the user's, the plan quotes the sender: their words are outside content, not the task's
    quoted = not plan
    plan = plan or (f"{msg.party} wrote on {msg.channel}: {msg.text!r}. Handle it sensibly; ask the user before "
                    "committing.")
    created = start_jorb(JorbIn(name=body.name, plan=plan, contacts=[msg.party], autonomy=body.autonomy,
                                approve_autonomy=body.approve_autonomy), ctx, untrusted=quoted)
    service(ctx).store.set_message(message_id, status="assigned", jorb_id=created["id"])
    return created


VIEW = View(name="inbox", title="Inbox", router=router, order=15)
