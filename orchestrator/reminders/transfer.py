"""Reminders taken from a file (`jarvis reminders import`, reading `jarvis export`'s reminders.json): as untrusted
as `jarvis memory import` keeps facts. A file can say anything, so an imported reminder is marked as written
outside the conversation (`IMPORTED`: posted into a chat thread it taints it, as an agent's reminder does), and it
fires only into a chat thread: one that would run an agent program, POST to a webhook or wake a jorb is not
imported (the file cannot choose what runs); each one left out is named with why.
"""

from __future__ import annotations

from typing import Any

from .models import IMPORTED, PENDING, Reminder
from .spec import ReminderInputError, ReminderRequest
from .store import ReminderStore


def import_reminders(store: ReminderStore, data: Any, *, source: str) -> tuple[list[Reminder], list[str]]:
    """The reminders created, and a sentence for each one left out."""
    rows = data.get("reminders") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ReminderInputError("not a reminders file: expected {\"reminders\": [...]} as `jarvis export` writes")
    made, left = [], []
    for r in rows:
        if not isinstance(r, dict) or not isinstance(r.get("title"), str) or not isinstance(r.get("due_date"), str):
            left.append(f"an entry without a title and a due_date: {str(r)[:80]}")
            continue
        title = r["title"]
        if r.get("status", PENDING) != PENDING:
            left.append(f"{title!r}: {r.get('status')}, not waiting any more")
            continue
        if r.get("process_name") or r.get("webhook_url") or r.get("jorb_id"):
            left.append(f"{title!r}: it fires into an agent program, a webhook or a jorb, which a file cannot "
                        "choose: create it again yourself")
            continue
        try:
            made.append(store.create(ReminderRequest(
                title=title, when=r["due_date"], rrule=r.get("rrule"), description=r.get("description"),
                priority=r.get("priority"), thread_id=r.get("thread_id")), created_by=f"{IMPORTED}{source}",
                naive="utc"))
        except ReminderInputError as exc:
            left.append(f"{title!r}: {exc}")
    return made, left
