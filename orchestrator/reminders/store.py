"""Reading and writing reminders. Every state change is one short transaction guarded by the current status,
so two schedulers (say `jarvis run` and `jarvis scheduler`) never fire the same occurrence twice at once, and a
cancel that races a fire wins cleanly.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

from sqlalchemy import and_, case, func, select, update
from sqlalchemy.orm import Session

from orchestrator.core.config import Settings
from orchestrator.storage.engines import jarvis_engine
from .models import (
    CANCELLED, FAILED, MISSED, PENDING, SENT, SKIPPED, STATUSES, Reminder, ReminderRow, new_reminder_id, utcnow,
)
from .recurrence import format_local, next_occurrence, parse_local, user_zone, zone_name
from .spec import ReminderInputError, ReminderRequest, resolve_request

log = logging.getLogger(__name__)


class ReminderNotFound(LookupError):
    pass


class ReminderStateError(ValueError):
    """The reminder exists but cannot do that in its current status."""


class ReminderStore:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.engine = jarvis_engine(settings)
        self.zone_name = zone_name(settings)
        self.zone = user_zone(settings)

    # Creating -----------------------------------------------------------------------------------------
    def create(self, req: ReminderRequest, *, created_by: str = "user", naive: Literal["local", "utc"] = "local",
               base_dir: Path | None = None, now: datetime | None = None) -> Reminder:
        """Validate and insert. A time without zone is the user's local time (`naive="local"`, people and the
        planner) or UTC (`naive="utc"`, agents per seed 001). Raises ReminderInputError."""
        now = now or utcnow()
        resolved = resolve_request(
            req, naive_zone=self.zone if naive == "local" else timezone.utc, user_zone=self.zone,
            user_zone_name=self.zone_name, default_missed_policy=self.settings.scheduler.missed_policy,
            not_before=now - timedelta(seconds=self.settings.scheduler.missed_grace_s), base_dir=base_dir, now=now)
        rid = new_reminder_id()
        row = ReminderRow(
            id=rid, series_id=rid, status=PENDING, attempts=0, created_at=now, updated_at=now, created_by=created_by,
            # A time already past fires at the next tick; it was not "missed" (lateness counts from fire_at).
            fire_at=max(resolved.due_date, now), **resolved.model_dump())
        with Session(self.engine) as s, s.begin():
            s.add(row)
            s.flush()
            created = Reminder.from_row(row)
        log.info("reminder %s created by %s: %r due %s (%s)", rid, created_by, created.title, created.due_date,
                 created.target_kind)
        return created

    def count_created_since(self, created_by: str, since: datetime) -> int:
        """Reminders `created_by` asked for since then (later occurrences of a series do not count)."""
        with Session(self.engine) as s:
            q = select(func.count()).select_from(ReminderRow).where(
                ReminderRow.created_by == created_by, ReminderRow.created_at >= since,
                ReminderRow.series_id == ReminderRow.id)
            return int(s.scalar(q) or 0)

    # Reading ------------------------------------------------------------------------------------------
    def get(self, reminder_id: str) -> Reminder | None:
        with Session(self.engine) as s:
            row = s.get(ReminderRow, reminder_id)
            return Reminder.from_row(row) if row else None

    def list(self, status: str | None = None, limit: int | None = None) -> list[Reminder]:
        if status is not None and status not in STATUSES:
            raise ReminderInputError(f"status {status!r} is not one of {', '.join(STATUSES)}")
        with Session(self.engine) as s:
            q = select(ReminderRow).order_by(ReminderRow.due_date, ReminderRow.created_at)
            if status:
                q = q.where(ReminderRow.status == status)
            if limit:
                q = q.limit(limit)
            return [Reminder.from_row(r) for r in s.scalars(q)]

    # User actions -------------------------------------------------------------------------------------
    def cancel(self, reminder_id: str, now: datetime | None = None) -> Reminder:
        """Cancel a pending (or missed) reminder; for a recurring one this ends the series."""
        now = now or utcnow()
        with Session(self.engine) as s, s.begin():
            row = s.get(ReminderRow, reminder_id)
            if row is None:
                raise ReminderNotFound(f"no reminder {reminder_id!r} (see `jarvis reminders list`)")
            if row.status not in (PENDING, MISSED):
                raise ReminderStateError(f"reminder {reminder_id} is already {row.status}; only pending or missed "
                                         "reminders can be cancelled")
            row.status, row.updated_at = CANCELLED, now
            return Reminder.from_row(row)

    def fire_now(self, reminder_id: str, now: datetime | None = None) -> Reminder:
        """Queue a reminder to fire at the next tick: a missed one (policy ask), a failed one, or a pending one early."""
        now = now or utcnow()
        with Session(self.engine) as s, s.begin():
            row = s.get(ReminderRow, reminder_id)
            if row is None:
                raise ReminderNotFound(f"no reminder {reminder_id!r} (see `jarvis reminders list`)")
            if row.status not in (PENDING, MISSED, FAILED):
                raise ReminderStateError(f"reminder {reminder_id} is {row.status}; only pending, missed or failed "
                                         "reminders can be fired")
            row.status, row.fire_at, row.attempts, row.updated_at = PENDING, now, 0, now
            return Reminder.from_row(row)

    # The scheduler's side -----------------------------------------------------------------------------
    def any_due(self, now: datetime) -> bool:
        """The idle tick: one indexed seek on (status, fire_at)."""
        with self.engine.connect() as conn:
            q = select(ReminderRow.id).where(ReminderRow.status == PENDING, ReminderRow.fire_at <= now).limit(1)
            return conn.execute(q).first() is not None

    def next_fire_at(self) -> datetime | None:
        with Session(self.engine) as s:
            return s.scalar(select(func.min(ReminderRow.fire_at)).where(ReminderRow.status == PENDING))

    def claim_due(self, now: datetime, lease_until: datetime, limit: int, missed_grace_s: float) -> list[Reminder]:
        """Atomically take up to `limit` due reminders: attempts + 1 and fire_at moved to the end of a lease, so
        a crash mid-delivery is retried after the lease. A first attempt that comes more than the grace period
        after its fire time was missed (the scheduler was not running): its `missed_at` is set to `now`."""
        due = (select(ReminderRow.id).where(ReminderRow.status == PENDING, ReminderRow.fire_at <= now)
               .order_by(ReminderRow.fire_at).limit(limit))
        late = and_(ReminderRow.attempts == 0, ReminderRow.fire_at < now - timedelta(seconds=missed_grace_s))
        stmt = (update(ReminderRow)
                .where(ReminderRow.id.in_(due), ReminderRow.status == PENDING, ReminderRow.fire_at <= now)
                .values(attempts=ReminderRow.attempts + 1, fire_at=lease_until, updated_at=now,
                        missed_at=case((late, now), else_=ReminderRow.missed_at))
                .returning(ReminderRow)
                .execution_options(synchronize_session=False))
        with Session(self.engine) as s, s.begin():
            rows = list(s.scalars(stmt))
            return [Reminder.from_row(r) for r in rows]

    def mark_sent(self, r: Reminder, now: datetime) -> Reminder | None:
        return self._settle(r, SENT, now, sent_at=now, last_error=None)

    def mark_failed(self, r: Reminder, reason: str, now: datetime) -> Reminder | None:
        return self._settle(r, FAILED, now, last_error=reason)

    def mark_skipped(self, r: Reminder, reason: str, now: datetime) -> Reminder | None:
        return self._settle(r, SKIPPED, now, last_error=reason, attempts=0)

    def mark_missed(self, r: Reminder, reason: str, now: datetime) -> Reminder | None:
        return self._settle(r, MISSED, now, last_error=reason, attempts=0)

    def retry_later(self, r: Reminder, reason: str, at: datetime, now: datetime) -> bool:
        return self._update_pending(r.id, fire_at=at, last_error=reason, updated_at=now)

    def defer(self, r: Reminder, reason: str, at: datetime, now: datetime) -> bool:
        """Try again later without using up an attempt (the target was busy, or the scheduler is stopping)."""
        return self._update_pending(r.id, fire_at=at, last_error=reason, updated_at=now,
                                    attempts=max(0, r.attempts - 1))

    def _update_pending(self, reminder_id: str, **values: object) -> bool:
        with Session(self.engine) as s, s.begin():
            res = s.execute(update(ReminderRow).where(ReminderRow.id == reminder_id, ReminderRow.status == PENDING)
                            .values(**values).execution_options(synchronize_session=False))
            return res.rowcount == 1

    def _settle(self, r: Reminder, status: str, now: datetime, **values: object) -> Reminder | None:
        """Close this occurrence and, for a recurring reminder, insert the next one in the same transaction.
        Returns the next occurrence (None when there is none, or the reminder was cancelled meanwhile)."""
        with Session(self.engine) as s, s.begin():
            res = s.execute(update(ReminderRow).where(ReminderRow.id == r.id, ReminderRow.status == PENDING)
                            .values(status=status, updated_at=now, **values)
                            .execution_options(synchronize_session=False))
            if res.rowcount != 1:
                log.info("reminder %s changed while it fired (cancelled?); leaving it as it is", r.id)
                return None
            # A missed occurrence fired later by the user already has its successor.
            later_exists = s.scalar(select(ReminderRow.id).where(
                ReminderRow.series_id == r.series_id, ReminderRow.due_date > r.due_date).limit(1))
            nxt = None if later_exists else self._next_row(r, now)
            if nxt is None:
                return None
            s.add(nxt)
            s.flush()
            return Reminder.from_row(nxt)

    def _next_row(self, r: Reminder, now: datetime) -> ReminderRow | None:
        if not (r.rrule and r.rrule_tz and r.rrule_start and r.due_local):
            return None
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(r.rrule_tz)
        try:
            found = next_occurrence(r.rrule, parse_local(r.rrule_start), parse_local(r.due_local), zone, now)
        except ValueError as exc:  # a rule that parsed at creation should parse now; say so if not
            log.error("reminder %s: cannot compute the next occurrence of %r: %s", r.id, r.rrule, exc)
            return None
        if found is None:
            log.info("reminder series %s is over (%s)", r.series_id, r.rrule)
            return None
        due, local = found
        rid = new_reminder_id()
        keep = ("series_id", "title", "description", "rrule", "rrule_tz", "rrule_start", "project_id", "priority",
                "process_name", "webhook_url", "jorb_id", "thread_id", "missed_policy", "created_by")
        return ReminderRow(id=rid, due_date=due, fire_at=due, due_local=format_local(local), status=PENDING,
                           attempts=0, created_at=now, updated_at=now, **{k: getattr(r, k) for k in keep})
