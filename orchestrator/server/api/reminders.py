"""The Reminders view (orchestrator/reminders): list with status, create, cancel, fire a missed one now.

  GET  /api/reminders[?status=pending]   {"reminders", "zone", "scheduler", "chat_thread"}
  POST /api/reminders                    {"title", "when", "rrule", "target_kind", "target", "description",
                                          "priority", "missed_policy"}; a time without zone is the user's local time
  POST /api/reminders/{id}/cancel        a pending or missed one (a recurring one stops repeating)
  POST /api/reminders/{id}/fire          a missed, failed or pending one, at the next scheduler tick
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path
from pydantic import BaseModel, Field

from orchestrator.jorbs.store import JorbNotFound, JorbStore
from orchestrator.reminders import (
    ReminderInputError, ReminderNotFound, ReminderRequest, ReminderStateError, ReminderStore,
)
from orchestrator.reminders.recurrence import describe
from . import AppContext, View, app_context

router = APIRouter()

ReminderId = Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="a reminder id")
_TARGET_FIELD = {"chat": "thread_id", "agent": "process_name", "webhook": "webhook_url", "jorb": "jorb_id"}


def _store(ctx: AppContext) -> ReminderStore:
    return ReminderStore(ctx.settings)


def _view(store: ReminderStore, r: Any) -> dict[str, Any]:
    return {**r.as_dict(), "due_text": describe(r.due_date, store.zone)}


def _scheduler_state(ctx: AppContext) -> dict[str, Any]:
    if not ctx.settings.scheduler.enabled:
        return {"state": "disabled", "detail": "scheduler.enabled is false in the config: reminders are kept but "
                                               "do not fire until it is true (or `jarvis scheduler` runs)"}
    for service in (ctx.services.report() if ctx.services else []):
        if service["name"] == "reminder-scheduler":
            return {"state": service["state"], "detail": service["detail"]}
    return {"state": "not running", "detail": "this server started without background services; reminders fire "
                                              "while `jarvis run` (with services) or `jarvis scheduler` runs"}


@router.get("/reminders")
def list_reminders(status: str | None = None, limit: int = 500,
                   ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    store = _store(ctx)
    try:
        rows = store.list(status=status or None, limit=max(1, min(limit, 5000)))
    except ReminderInputError as exc:
        raise HTTPException(400, str(exc)) from None
    return {"reminders": [_view(store, r) for r in rows], "zone": store.zone_name,
            "scheduler": _scheduler_state(ctx), "chat_thread": ctx.settings.scheduler.chat_thread}


class ReminderIn(BaseModel):
    title: str = Field(..., max_length=500)
    when: str = Field(..., max_length=64, description="words ('tomorrow at 9am') or ISO 8601; without a zone it is the user's local time")
    rrule: str | None = Field(None, max_length=500)
    target_kind: Literal["chat", "agent", "webhook", "jorb"] = "chat"
    target: str | None = Field(None, max_length=4096, description="thread id, agent command, URL or jorb id")
    description: str | None = Field(None, max_length=20_000)
    priority: Literal["low", "medium", "high"] = "medium"
    missed_policy: Literal["catch_up", "skip", "ask"] | None = None


@router.post("/reminders", status_code=201)
def create_reminder(body: ReminderIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    target = (body.target or "").strip()
    if not target:
        if body.target_kind != "chat":
            what = {"agent": "the agent's command", "webhook": "the webhook URL", "jorb": "the jorb"}[body.target_kind]
            raise HTTPException(400, f"A {body.target_kind} reminder needs {what} as its target.")
        target = ctx.settings.scheduler.chat_thread
    if body.target_kind == "jorb":
        try:
            target = JorbStore(ctx.settings).get(target).id
        except JorbNotFound as exc:
            raise HTTPException(400, str(exc)) from None
    req = ReminderRequest(title=body.title, when=body.when, rrule=(body.rrule or "").strip() or None,
                          description=(body.description or "").strip() or None, priority=body.priority,
                          missed_policy=body.missed_policy, **{_TARGET_FIELD[body.target_kind]: target})
    store = _store(ctx)
    try:
        created = store.create(req, created_by="web")
    except ReminderInputError as exc:
        raise HTTPException(400, str(exc)) from None
    return _view(store, created)


def _act(ctx: AppContext, fn_name: str, reminder_id: str) -> dict[str, Any]:
    store = _store(ctx)
    try:
        r = getattr(store, fn_name)(reminder_id)
    except ReminderNotFound as exc:
        raise HTTPException(404, str(exc)) from None
    except ReminderStateError as exc:
        raise HTTPException(409, str(exc)) from None
    return _view(store, r)


@router.post("/reminders/{reminder_id}/cancel")
def cancel_reminder(reminder_id: str = ReminderId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    return _act(ctx, "cancel", reminder_id)


@router.post("/reminders/{reminder_id}/fire")
def fire_reminder(reminder_id: str = ReminderId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    return _act(ctx, "fire_now", reminder_id)


VIEW = View(name="reminders", title="Reminders", router=router, order=40)
