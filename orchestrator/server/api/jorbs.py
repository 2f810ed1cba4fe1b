"""Jorbs and missions: the Jorbs view's API (orchestrator/jorbs: the App's JorbService, `ctx.app.jorbs`).

  GET  /api/jorbs[?all=1&mode=script|mission]   jorbs with their status (open ones unless `all`)
  GET  /api/jorbs/form                          what the create form offers: side effects, policies, channels
  POST /api/jorbs                               create a jorb or a mission (autonomy overrides approved explicitly)
  GET  /api/jorbs/{id}                          plan, pending questions, conversation, script results / rounds
  POST /api/jorbs/{id}/reply                    {"text", "as_user", "party", "channel"}: as the counterpart or as you
  POST /api/jorbs/{id}/decide                   {"interrupt_id", "ref", "action": "approve"|"reject", "note"}
  POST /api/jorbs/{id}/resume                   {"answers": {interrupt_id: answer}} (or "decisions"): the confirmation dialog
  POST /api/jorbs/{id}/step                     {"interrupt_id", "step"}: a human-policy step
  POST /api/jorbs/{id}/policy                   {"policy"}: swap the policy of a paused jorb
  POST /api/jorbs/{id}/cancel

Everything that runs the jorb runs in the background (JorbService's decisions with wait=False, each naming the
interrupt it answers); the answer is the jorb as
it was when the action was accepted, with `working: true`, and the UI polls until the jorb waits again.
"""

from __future__ import annotations

import logging
from pathlib import Path as FsPath
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path
from pydantic import BaseModel, Field

from integrations.base import KNOWN_SIDE_EFFECTS

from orchestrator.channels.registry import known_channels
from orchestrator.core.config import Mode
from ._answers import ResumeIn, resume_values_for
from orchestrator.jorbs.policies import HEURISTICS
from orchestrator.jorbs.schema import OPEN_STATUSES, JorbStatus
from orchestrator.jorbs.service import JorbBusy, JorbError, JorbMovedOn, JorbService, JorbView
from orchestrator.jorbs.store import JorbNotFound
from orchestrator.tools.answers import with_ref
from . import AppContext, View, app_context

log = logging.getLogger(__name__)
router = APIRouter()

JorbId = Annotated[str, Path(pattern=r"^[A-Za-z0-9]{1,32}$", description="a jorb id")]


def service(ctx: AppContext) -> JorbService:
    return ctx.app.jorbs


def call(fn, *args: Any, **kwargs: Any) -> Any:
    """A jorb operation with its failures as HTTP errors that say what to do."""
    try:
        return fn(*args, **kwargs)
    except JorbNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except (JorbBusy, JorbMovedOn) as exc:
        raise HTTPException(409, str(exc)) from None
    except JorbError as exc:
        raise HTTPException(400, str(exc)) from None


def _summary(row: Any, working: bool = False) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "status": row.status, "mode": row.mode, "policy": row.policy,
            "waiting_party": row.waiting_party, "waiting_channel": row.waiting_channel,
            "pause_reason": row.pause_reason, "error": row.error, "steps": row.steps,
            "updated_at": row.updated_at.isoformat(), "created_at": row.created_at.isoformat(), "working": working}


def _rounds(view: JorbView) -> list[dict[str, Any]]:
    st = view.state
    if st is None:
        return []
    rounds = []
    for i in range(1, st.iteration + 1):
        rounds.append({"iteration": i,
                       "notes": [n.model_dump() for n in st.notes if n.iteration == i],
                       "jobs": [r.model_dump() for r in st.results if r.iteration == i]})
    return rounds


def detail(ctx: AppContext, view: JorbView) -> dict[str, Any]:
    svc = service(ctx)
    row = view.row
    data = view.as_dict(full=True)
    working = svc.busy(row.id)
    data["working"] = working
    if row.mode == "mission":
        data["rounds"] = _rounds(view)
        data.pop("results", None)
        data.pop("notes", None)
    # Messages written to the jorb that it has not read yet (it reads them when it next waits for a reply).
    # The UI is looking at this jorb (its confirmations are not sent to the phone), and where each was answered.
    svc.answers.ui_viewed(row.thread_id)
    data["answered"] = svc.answers.answers_for_thread(row.thread_id)
    for item in data["pending"]:
        item["sent"] = svc.answers.sent_for(with_ref(item)["ref"])
    data["queued"] = [m.as_dict() for m in svc.store.messages(jorb_id=row.id, statuses=("pending",), direction="in")]
    is_open = row.status in OPEN_STATUSES
    data["can"] = {"reply": is_open, "cancel": is_open,
                   "policy": row.status in (JorbStatus.PAUSED, JorbStatus.AWAITING_REPLY, JorbStatus.PLANNING) and not working,
                   "retry": (row.status == JorbStatus.FAILED or svc.stalled(row)) and not view.finished and not working}
    return data


# -- reading --------------------------------------------------------------------------------------------
@router.get("/jorbs")
def list_jorbs(all: bool = False, mode: Literal["script", "mission"] | None = None,
               ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
    svc = service(ctx)
    rows = svc.list(statuses=None if all else OPEN_STATUSES, mode=mode)
    return [_summary(r, svc.busy(r.id)) for r in rows]


@router.get("/jorbs/form")
def form(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    return {
        "effects": [{"name": k, "description": v,
                     "mode": ctx.settings.autonomy.effects.get(k, ctx.settings.autonomy.default)}
                    for k, v in KNOWN_SIDE_EFFECTS.items()],
        "policies": ["llm", "human", *[f"heuristic:{k}" for k in sorted(HEURISTICS)]],
        "channels": known_channels(),
    }


@router.get("/jorbs/{jorb_id}")
def get_jorb(jorb_id: JorbId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    return detail(ctx, call(service(ctx).view, jorb_id))


# -- creating -------------------------------------------------------------------------------------------
class JorbIn(BaseModel):
    mode: Literal["script", "mission"] = "script"
    name: str = Field("", max_length=200)
    plan: str = Field(..., min_length=1, max_length=20_000, description="the task (a mission's goal)")
    contacts: list[str] = Field(default_factory=list, max_length=50)
    policy: str = Field("llm", max_length=200)
    autonomy: dict[str, Mode] = Field(default_factory=dict)
    approve_autonomy: bool = Field(False, description="the user approved the autonomy overrides")
    allow: list[str] | None = Field(None, description="restrict the jorb to these capabilities")
    workspace: str | None = Field(None, max_length=4096, description="a mission's folder for its file jobs")


@router.post("/jorbs", status_code=201)
def create_jorb(body: JorbIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    return start_jorb(body, ctx)


def start_jorb(body: JorbIn, ctx: AppContext, *, untrusted: bool = False) -> dict[str, Any]:
    """`untrusted`: the plan holds words that are not the user's (an inbox message's): the jorb's effects ask
    first from its first step."""
    granted = {k: v for k, v in body.autonomy.items() if k.strip()}
    if granted and not body.approve_autonomy:
        listed = ", ".join(f"{k}={v}" for k, v in granted.items())
        raise HTTPException(400, f"This jorb would act without asking for: {listed} (its own calls only). "
                                 "Approve these autonomy overrides explicitly, or remove them.")
    options: dict[str, Any] = {}
    if body.workspace:
        if body.mode != "mission":
            raise HTTPException(400, "A workspace is for missions; leave it empty for a jorb.")
        ws = FsPath(body.workspace).expanduser()
        if not ws.is_dir():
            raise HTTPException(400, f"The workspace {body.workspace} is not a folder on this machine; create it or "
                                     "pick an existing one.")
        options["workspace"] = str(ws.resolve())
    name = body.name.strip() or (body.plan.strip().splitlines()[0][:60] if body.mode == "mission" else "")
    if not name:
        raise HTTPException(400, "Give the jorb a short name.")
    contacts = [c.strip() for c in body.contacts if c.strip()]
    allow = [a.strip() for a in body.allow if a.strip()] if body.allow else None
    view = call(service(ctx).create, name, body.plan, contacts=contacts, policy=body.policy.strip() or "llm",
                autonomy=granted, context=allow, mode=body.mode, options=options, background=True, untrusted=untrusted)
    return detail(ctx, view)


# -- acting ---------------------------------------------------------------------------------------------
class ReplyIn(BaseModel):
    text: str = Field(..., min_length=1, max_length=100_000)
    as_user: bool = Field(False, description="you intervening, not the counterpart")
    party: str | None = Field(None, max_length=256, description="who speaks (default: the one the jorb waits on)")
    channel: str = Field("local", max_length=32)


class DecideIn(BaseModel):
    interrupt_id: str = Field(..., max_length=128)
    ref: str | None = Field(None, max_length=64, description="the question shown (the item's `ref`)")
    action: Literal["approve", "reject"]
    note: str | None = Field(None, max_length=20_000)


class StepIn(BaseModel):
    interrupt_id: str = Field(..., max_length=128)
    step: dict[str, Any] | str


class PolicyIn(BaseModel):
    policy: str = Field(..., min_length=1, max_length=200)


def _after(ctx: AppContext, jorb_id: str) -> dict[str, Any]:
    return detail(ctx, call(service(ctx).view, jorb_id))


@router.post("/jorbs/{jorb_id}/reply")
def reply(jorb_id: JorbId, body: ReplyIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    call(service(ctx).reply, jorb_id, body.text, party=body.party, channel=body.channel.strip() or "local",
         is_user=body.as_user, background=True, reasoning="written in the Jarvis UI")
    return _after(ctx, jorb_id)


@router.post("/jorbs/{jorb_id}/decide")
def decide(jorb_id: JorbId, body: DecideIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    decide_now = service(ctx).approve if body.action == "approve" else service(ctx).reject
    call(decide_now, jorb_id, (body.note or "").strip() or None, interrupt_id=body.interrupt_id, ref=body.ref,
         wait=False, via="the web UI")
    return _after(ctx, jorb_id)


@router.post("/jorbs/{jorb_id}/resume")
def resume(jorb_id: JorbId, body: ResumeIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    if not body.ids():
        raise HTTPException(400, "Answer the confirmations the jorb waits for: no answer was given.")
    view = call(service(ctx).view, jorb_id)
    asked = {p["interrupt_id"]: p for p in view.pending if p.get("type") == "confirmation"}
    unknown = sorted(body.ids() - set(asked))
    for interrupt_id in unknown:  # answered from a phone meanwhile: say so
        call(service(ctx).refuse_if_answered, jorb_id, interrupt_id)
    if unknown:
        raise HTTPException(409, f"jorb {view.row.id} no longer waits for {', '.join(unknown)}; reload")
    call(service(ctx).resume, jorb_id, resume_values_for(body, asked), wait=False, refs=body.refs())
    return _after(ctx, jorb_id)


@router.post("/jorbs/{jorb_id}/step")
def answer_step(jorb_id: JorbId, body: StepIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    call(service(ctx).answer_step, jorb_id, body.step, interrupt_id=body.interrupt_id, wait=False)
    return _after(ctx, jorb_id)


@router.post("/jorbs/{jorb_id}/policy")
def set_policy(jorb_id: JorbId, body: PolicyIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    if service(ctx).busy(jorb_id):
        raise HTTPException(409, f"jorb {jorb_id} is working; swap its policy once it waits")
    call(service(ctx).set_policy, jorb_id, body.policy.strip())
    return _after(ctx, jorb_id)


@router.post("/jorbs/{jorb_id}/retry")
def retry(jorb_id: JorbId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    call(service(ctx).retry, jorb_id, wait=False)
    return _after(ctx, jorb_id)


@router.post("/jorbs/{jorb_id}/cancel")
def cancel(jorb_id: JorbId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    call(service(ctx).cancel, jorb_id, wait=False)
    return _after(ctx, jorb_id)


VIEW = View(name="jorbs", title="Jorbs", router=router, order=10)
