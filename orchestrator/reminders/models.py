"""The reminders table and its plain views.

One row per occurrence: a recurring reminder is a series of rows sharing `series_id`; when an occurrence is
settled (sent, failed, skipped, missed) the next one is inserted in the same transaction, so there is never
more than one pending row per series (which is what makes catch-up fire once, not once per missed occurrence).

`due_date` is when the reminder is scheduled (what targets see); `fire_at` is when the scheduler should try
next (the due date, a retry time after a failure, or the end of a delivery lease). The idle tick is one
indexed lookup on (status, fire_at).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import DateTime, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from orchestrator.storage.engines import Base, StatusText, utcnow  # noqa: F401 - re-exported (tests import it here)



class ReminderStatus(StrEnum):
    """Where a reminder stands; the store refuses any other value."""

    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"  # missed after downtime, policy skip
    MISSED = "missed"  # missed after downtime, policy ask: waits for the user


PENDING, SENT, FAILED, CANCELLED = ReminderStatus.PENDING, ReminderStatus.SENT, ReminderStatus.FAILED, ReminderStatus.CANCELLED  # noqa: E501
SKIPPED, MISSED = ReminderStatus.SKIPPED, ReminderStatus.MISSED
STATUSES = tuple(ReminderStatus)
PRIORITIES = ("low", "medium", "high")
MISSED_POLICIES = ("catch_up", "skip", "ask")

Priority = Literal["low", "medium", "high"]
MissedPolicy = Literal["catch_up", "skip", "ask"]
TargetKind = Literal["agent", "webhook", "jorb", "chat"]


def new_reminder_id() -> str:
    return f"rem_{uuid.uuid4().hex}"


def iso_utc(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with a `Z`, as seed 001 shows (`"2025-06-01T09:00:00Z"`)."""
    if value is None:
        return None
    return value.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


class UTCDateTime(TypeDecorator):
    """Aware datetimes in, aware UTC datetimes out; stored as naive UTC so SQLite compares them as text."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(timezone.utc).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class ReminderRow(Base):
    __tablename__ = "reminders"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    series_id: Mapped[str] = mapped_column(String(40), index=True)
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    due_date: Mapped[datetime] = mapped_column(UTCDateTime)
    fire_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Recurrence: the RFC 5545 rule, the zone it is computed in, the series' first local time and this
    # occurrence's local wall time (so a time inside a DST gap does not drift the series).
    rrule: Mapped[str | None] = mapped_column(Text, nullable=True)
    rrule_tz: Mapped[str | None] = mapped_column(String(64), nullable=True)
    rrule_start: Mapped[str | None] = mapped_column(String(32), nullable=True)
    due_local: Mapped[str | None] = mapped_column(String(32), nullable=True)
    project_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    priority: Mapped[str] = mapped_column(String(8), default="medium")
    status: Mapped[str] = mapped_column(StatusText(ReminderStatus, 12), default=PENDING)
    # Exactly one target is set; none of the first three means the chat thread `thread_id`.
    process_name: Mapped[str | None] = mapped_column(Text, nullable=True)
    webhook_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    jorb_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    thread_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    missed_policy: Mapped[str] = mapped_column(String(10), default="catch_up")
    missed_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str] = mapped_column(String(512), default="user")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    __table_args__ = (
        Index("ix_reminders_status_fire_at", "status", "fire_at"),
        Index("ix_reminders_created_by_at", "created_by", "created_at"),
    )


class Reminder(BaseModel):
    """A detached, read-only view of one row, handed to targets, the CLI and the tools."""

    id: str
    series_id: str
    title: str
    description: str | None
    due_date: datetime
    fire_at: datetime
    rrule: str | None
    rrule_tz: str | None
    rrule_start: str | None
    due_local: str | None
    project_id: str | None
    priority: str
    status: str
    process_name: str | None
    webhook_url: str | None
    jorb_id: str | None
    thread_id: str | None
    attempts: int
    last_error: str | None
    missed_policy: str
    missed_at: datetime | None
    created_at: datetime
    created_by: str
    updated_at: datetime
    sent_at: datetime | None

    @classmethod
    def from_row(cls, row: ReminderRow) -> "Reminder":
        return cls.model_validate({name: getattr(row, name) for name in cls.model_fields})

    @property
    def target_kind(self) -> TargetKind:
        if self.process_name:
            return "agent"
        if self.webhook_url:
            return "webhook"
        if self.jorb_id:
            return "jorb"
        return "chat"

    @property
    def target(self) -> str:
        return self.process_name or self.webhook_url or self.jorb_id or self.thread_id or ""

    def fire_params(self) -> dict[str, Any]:
        """The `reminder.fire` params of seed 001 (also the webhook body and the jorb event)."""
        return {
            "reminder_id": self.id,
            "title": self.title,
            "description": self.description,
            "due_date": iso_utc(self.due_date),
            "project_id": self.project_id,
            "priority": self.priority,
        }

    def as_dict(self) -> dict[str, Any]:
        data = self.model_dump()
        for key, value in data.items():
            if isinstance(value, datetime):
                data[key] = iso_utc(value)
        data["target_kind"] = self.target_kind
        data["target"] = self.target
        return data


# `created_by` of a reminder the planner made after its thread had read outside content: its title and description
# may be that content's words (reminders/tools.py)
PLANNER_AFTER_CONTENT = "planner:after-outside-content"


# `created_by` prefix of a reminder read from a file (reminders/transfer.py): its text is the file's
IMPORTED = "import:"


def written_outside_the_conversation(created_by: str) -> bool:
    """Whether a reminder's text may be someone else's than the user's: an agent program's, the planner's after
    reading outside content, or a file's. Posted into a chat, it taints that thread (reminders/targets.py)."""
    return created_by == PLANNER_AFTER_CONTENT or created_by.startswith(("agent:", IMPORTED))
