"""Planner tools: reminder_create, reminder_list, reminder_cancel (create and cancel have side effect reminder_write)."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from integrations.base import FromOutside, ToolError, make_tool

from orchestrator.core.config import Settings
from orchestrator.core.ids import conversation_of
from orchestrator.core.visible import elide
from orchestrator.tools.executor import read_outside_content
from .models import PLANNER_AFTER_CONTENT, written_outside_the_conversation
from .recurrence import describe
from .spec import ReminderInputError, ReminderRequest
from .store import ReminderNotFound, ReminderStateError, ReminderStore


class CreateArgs(BaseModel):
    title: str = Field(description="a short title of what to remind about")
    when: str = Field(description="the time in the user's words ('tomorrow at 9am') or ISO 8601; without an offset it "
                                  "is the user's local time")
    # The optional ones say when to leave them out: small models filled every one, copying the examples (a daily
    # rule, "this conversation" as a thread, a made-up webhook URL), each one a confirmation the user would deny.
    rrule: str | None = Field(None, description="only when the user asks for a repeating reminder: an RFC 5545 "
                                                "recurrence rule such as FREQ=WEEKLY;BYDAY=MO")
    description: str | None = Field(None, description="longer text shown with the reminder")
    priority: Literal["low", "medium", "high"] = "medium"
    thread_id: str | None = Field(None, description="another chat thread's id to post into; left out, this "
                                                    "conversation")
    webhook_url: str | None = Field(None, description="only a URL the user gave: POST the reminder there instead "
                                                      "of the chat")
    process_name: str | None = Field(None, description="only an agent program the user named: send it there "
                                                       "instead of the chat")
    jorb_id: str | None = Field(None, description="only a jorb id the user gave: wake that long-running task "
                                                  "instead of the chat")


class ListArgs(BaseModel):
    status: Literal["pending", "sent", "failed", "cancelled", "skipped", "missed"] | None = Field(
        None, description="only reminders with this status")
    limit: int = Field(50, ge=1, le=500)


class CancelArgs(BaseModel):
    reminder_id: str = Field(description="the id (rem_...) from reminder_list or reminder_create")


def _target_words(args: dict) -> str:
    if args.get("process_name"):
        return f"run the agent program {args['process_name']} with it"
    if args.get("webhook_url"):
        return f"POST it to {args['webhook_url']}"
    if args.get("jorb_id"):
        return f"wake jorb {args['jorb_id']} with it"
    if args.get("thread_id"):
        return f"post it in thread {args['thread_id']}"
    return "post it in this conversation"


def build_reminder_tools(settings: Settings) -> list[BaseTool]:
    store_box: list = []
    lock = threading.Lock()

    def store():
        with lock:
            if not store_box:
                store_box.append(ReminderStore(settings))
            return store_box[0]

    def reminder_create(title: str, when: str, rrule: str | None = None, description: str | None = None,
                        priority: str = "medium", thread_id: str | None = None, webhook_url: str | None = None,
                        process_name: str | None = None, jorb_id: str | None = None,
                        config: RunnableConfig = None) -> str:  # type: ignore[assignment]
        """Create a reminder at a time (optionally repeating). By default it appears in this conversation."""
        if not (thread_id or webhook_url or process_name or jorb_id):
            thread_id = str(((config or {}).get("configurable") or {}).get("thread_id") or settings.scheduler.chat_thread)
            # a jorb's own thread is the jorb's checkpoints, which only the jorb writes: its reminder wakes it
            jorb_id = conversation_of(thread_id).jorb_id
            thread_id = None if jorb_id else thread_id
        req = ReminderRequest(title=title, when=when, rrule=rrule, description=description, priority=priority,
                              thread_id=thread_id, webhook_url=webhook_url, process_name=process_name, jorb_id=jorb_id)
        try:
            r = store().create(req, created_by=PLANNER_AFTER_CONTENT if read_outside_content(config) else "planner")
        except ReminderInputError as exc:
            raise ToolError(str(exc)) from None
        repeat = f", repeating {r.rrule}" if r.rrule else ""
        return (f"Created reminder {r.id} {r.title!r} for {describe(r.due_date, store().zone)}{repeat} "
                f"({r.target_kind}: {r.target}).")

    def reminder_list(status: str | None = None, limit: int = 50) -> str:
        """List reminders (id, status, due time, title, target), by due time."""
        rows = store().list(status=status, limit=limit)
        if not rows:
            return "No reminders" + (f" with status {status}." if status else ".")
        lines = []
        outside = False  # a title an agent or a page wrote, or an error quoting a webhook's answer or agent's stderr
        for r in rows:
            line = f"{r.id} [{r.status}] {describe(r.due_date, store().zone)} {r.title!r} -> {r.target_kind} {r.target}"
            outside = outside or written_outside_the_conversation(r.created_by)
            if r.rrule:
                line += f" (repeats {r.rrule})"
            if r.last_error and r.status in ("failed", "missed", "skipped"):
                line += f" ({r.last_error[:150]})"
                outside = outside or r.target_kind in ("webhook", "agent")
            lines.append(line)
        text = "\n".join(lines)
        return FromOutside(text) if outside else text

    def reminder_cancel(reminder_id: str) -> str:
        """Cancel a pending reminder; a repeating one stops repeating."""
        try:
            r = store().cancel(reminder_id.strip())
        except (ReminderNotFound, ReminderStateError) as exc:
            raise ToolError(str(exc)) from None
        text = f"Cancelled reminder {r.id} {r.title!r}."
        return FromOutside(text) if written_outside_the_conversation(r.created_by) else text  # the title is theirs

    return [
        make_tool(
            reminder_create, args_schema=CreateArgs, side_effects=["reminder_write"],
            side_effects_for=_create_effects, fix_args=lambda a, now: _fixed_time(a, settings, now),
            summarize=lambda a: (f"Create a reminder {a.get('title')!r} at {_when_words(a.get('when'), settings)}"
                                 f"{', repeating ' + a['rrule'] if a.get('rrule') else ''} and "
                                 f"{_target_words(a)}"
                                 + (f", saying {elide(str(a['description']), 200)!r}" if a.get("description") else "")
                                 + "."),
            trusted_output="the reminder as stored from this call's own arguments",
            deciding_args=("when", "thread_id", "webhook_url", "process_name", "jorb_id"),
            opaque_args=("thread_id", "jorb_id")),
        # an agent's or a page's words in a reminder come back as FromOutside
        make_tool(reminder_list, args_schema=ListArgs, trusted_output="the user's own reminders"),
        make_tool(reminder_cancel, args_schema=CancelArgs, side_effects=["reminder_write"],
                  summarize=lambda a: f"Cancel reminder {a.get('reminder_id')}.",
                  trusted_output="the user's own reminder it cancelled", deciding_args=("reminder_id",),
                  opaque_args=("reminder_id",)),
    ]


def _fixed_time(args: dict[str, Any], settings: Settings, now: datetime) -> dict[str, Any]:
    """The call with words for its time ("tomorrow at 9am") as the instant they mean at `now`, in the user's zone."""
    from .recurrence import fixed_time, user_zone

    if not isinstance(args.get("when"), str):
        return args
    return {**args, "when": fixed_time(args["when"], user_zone(settings), now)}


def _when_words(when: Any, settings: Settings) -> str:
    """The time the user confirms, as they read a clock: local time with its zone (a model writes UTC with a `Z`);
    a time that does not parse is shown as written (creating the reminder then says what is wrong)."""
    from .recurrence import RecurrenceError, parse_when, user_zone

    zone = user_zone(settings)
    try:
        return describe(parse_when(str(when or ""), zone), zone)
    except RecurrenceError:
        return str(when)


def _create_effects(args: dict[str, Any]) -> list[str]:
    """A reminder sent to an agent program starts that program (outside the sandbox) when it fires; one sent to a
    URL POSTs its title and description there: data leaving the machine."""
    effects = ["reminder_write"]
    if str(args.get("process_name") or "").strip():
        effects.append("process_start")
    if str(args.get("webhook_url") or "").strip():
        effects.append("network")
    return effects

