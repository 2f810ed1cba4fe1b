"""What a caller (CLI, planner tool, agent over JSON-RPC) asks for, validated into a row's values.

Every problem is reported as a `ReminderInputError` whose message names the field and what to write.
"""

from __future__ import annotations

import os
import shlex
import shutil
from datetime import datetime, tzinfo
from pathlib import Path
from urllib.parse import urlparse

from pydantic import BaseModel

from orchestrator.core.ids import ConversationKind, conversation_of

from .models import MISSED_POLICIES, PRIORITIES
from .recurrence import RecurrenceError, first_occurrence, format_local, parse_when


class ReminderInputError(ValueError):
    """Bad input for a reminder; the message is meant for the user (or the agent) as is."""


class ReminderRequest(BaseModel):
    """A reminder to create. `when` is ISO 8601 or words for a time; the caller says how a time without zone is
    read."""

    title: str
    when: str
    rrule: str | None = None
    description: str | None = None
    priority: str | None = None
    project_id: str | None = None
    process_name: str | None = None
    webhook_url: str | None = None
    jorb_id: str | None = None
    thread_id: str | None = None
    missed_policy: str | None = None


class ResolvedReminder(BaseModel):
    """Validated values, ready to become a row."""

    title: str
    description: str | None
    due_date: datetime
    rrule: str | None
    rrule_tz: str | None
    rrule_start: str | None
    due_local: str | None
    priority: str
    project_id: str | None
    process_name: str | None
    webhook_url: str | None
    jorb_id: str | None
    thread_id: str | None
    missed_policy: str


def resolve_process_name(value: str, base_dir: Path | None = None) -> str:
    """An agent command: a path to an executable file (made absolute) or a command found on PATH.

    A string that is not an existing file is split like a shell would (`python3 agents/echo.py`)."""
    text = value.strip()
    if not text:
        raise ReminderInputError("process_name is empty; give the path of an executable agent script")
    base = base_dir or Path.cwd()
    path = Path(os.path.expanduser(text))
    candidate = path if path.is_absolute() else base / path
    if candidate.is_file():
        if not os.access(candidate, os.X_OK):
            raise ReminderInputError(
                f"process_name {text!r} is not executable; run `chmod +x {candidate}` (it needs a #! line)")
        return str(candidate.resolve())
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise ReminderInputError(f"process_name {text!r} cannot be parsed as a command: {exc}") from None
    head = argv[0]
    if os.sep in head:
        head_path = Path(os.path.expanduser(head))
        head_path = head_path if head_path.is_absolute() else base / head_path
        if not head_path.is_file():
            raise ReminderInputError(f"process_name {text!r}: no such file {head_path}; give the path of an agent")
        argv[0] = str(head_path.resolve())
        return shlex.join(argv)
    if shutil.which(head) is None:
        raise ReminderInputError(
            f"process_name {text!r}: no file of that name and no command {head!r} on PATH; give the path of an agent")
    return text


def url_within(url: str, prefix: str) -> bool:
    """Whether `url` is `prefix` or below it: the same scheme, host and port, and a path under the prefix's (a
    plain string prefix let http://localhost:8070 stand for http://localhost:8070.evil.example)."""
    u, p = urlparse(url.strip()), urlparse(prefix.strip())
    if (u.scheme.lower(), u.netloc.lower()) != (p.scheme.lower(), p.netloc.lower()) or not p.netloc:
        return False
    base = p.path.rstrip("/")
    return u.path == base or u.path.startswith(base + "/") or not base


def check_webhook_url(value: str) -> str:
    url = value.strip()
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ReminderInputError(f"webhook_url {value!r} is not an http(s) URL; write it like http://localhost:8070/agent/7")
    return url


def resolve_request(req: ReminderRequest, *, naive_zone: tzinfo, user_zone: tzinfo, user_zone_name: str,
                    default_missed_policy: str, not_before: datetime | None = None,
                    base_dir: Path | None = None, now: datetime | None = None) -> ResolvedReminder:
    """Validate a request. A one-off time in the past fires at once; a recurring series whose start is past
    begins at its first occurrence at or after `not_before`. Words for a time ("in 20 minutes") count from `now`."""
    title = (req.title or "").strip()
    if not title:
        raise ReminderInputError("title is empty; give the reminder a short title")
    if len(title) > 500:
        raise ReminderInputError("title is longer than 500 characters; put the details in description")
    priority = (req.priority or "medium").strip().lower()
    if priority not in PRIORITIES:
        raise ReminderInputError(f"priority {req.priority!r} is not one of {', '.join(PRIORITIES)}")
    policy = (req.missed_policy or default_missed_policy).strip().lower().replace("-", "_")
    if policy not in MISSED_POLICIES:
        raise ReminderInputError(f"missed policy {req.missed_policy!r} is not one of {', '.join(MISSED_POLICIES)}")

    targets = {k: v for k, v in (("process_name", req.process_name), ("webhook_url", req.webhook_url),
                                 ("jorb_id", req.jorb_id), ("thread_id", req.thread_id)) if v}
    if len(targets) > 1:
        raise ReminderInputError(f"give one target, not {len(targets)} ({', '.join(targets)}): a reminder fires "
                                 "into one agent, webhook, jorb or chat thread")
    if not targets:
        raise ReminderInputError("no target: give process_name, webhook_url, jorb_id or thread_id")
    if req.thread_id and conversation_of(req.thread_id.strip()).kind is ConversationKind.JORB:
        raise ReminderInputError(f"thread_id {req.thread_id!r} is a jorb's own thread, which only the jorb writes: "
                                 "give jorb_id to wake the jorb instead")
    process_name = resolve_process_name(req.process_name, base_dir) if req.process_name else None
    webhook_url = check_webhook_url(req.webhook_url) if req.webhook_url else None
    jorb_id = req.jorb_id.strip() if req.jorb_id else None
    thread_id = req.thread_id.strip() if req.thread_id else None

    try:
        when = parse_when(req.when, naive_zone, now)
        rule = (req.rrule or "").strip() or None
        if rule:
            due, local = first_occurrence(when, rule, user_zone, not_before)
            rrule_tz, rrule_start, due_local = user_zone_name, format_local(
                when.astimezone(user_zone).replace(tzinfo=None, microsecond=0)), format_local(local)
        else:
            due, rrule_tz, rrule_start, due_local = when, None, None, None
    except RecurrenceError as exc:
        raise ReminderInputError(str(exc)) from None

    return ResolvedReminder(
        title=title, description=(req.description or None), due_date=due, rrule=rule, rrule_tz=rrule_tz,
        rrule_start=rrule_start, due_local=due_local, priority=priority, project_id=req.project_id or None,
        process_name=process_name, webhook_url=webhook_url, jorb_id=jorb_id, thread_id=thread_id,
        missed_policy=policy,
    )
