"""Reading and writing jorb rows and channel messages (the SQL side of jorbs; the checkpoint holds the rest)."""

from __future__ import annotations

import json
import uuid
from datetime import timezone
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from orchestrator.channels.addresses import normalize_party
from orchestrator.core.config import Settings
from orchestrator.storage.engines import jarvis_engine
from .models import ChannelMessageRow, JorbContactRow, JorbRow, utcnow
from .schema import OPEN_STATUSES, JorbStatus


def new_jorb_id() -> str:
    return uuid.uuid4().hex[:10]


class JorbNotFound(LookupError):
    pass



class _Keep:
    """A field of JorbStore.update left as it is (None clears it)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()


class JorbStore:
    def __init__(self, settings: Settings):
        self.engine = jarvis_engine(settings)

    # -- jorbs ----------------------------------------------------------------------------------------
    def create(self, *, name: str, plan: str, contacts: list[str] | None = None, policy: str = "llm",
               autonomy: dict[str, str] | None = None, context: list[str] | None = None, mode: str = "script",
               options: dict[str, Any] | None = None, origin_thread: str | None = None,
               jorb_id: str | None = None) -> JorbRow:
        parties = sorted({p for p in (normalize_party(c) for c in contacts or []) if p})
        row = JorbRow(
            id=jorb_id or new_jorb_id(), name=name.strip(), plan=plan.strip(), status=JorbStatus.PLANNING, mode=mode, policy=policy,
            contacts_json=json.dumps(parties),
            autonomy_json=json.dumps(autonomy or {}), context_json=json.dumps(context) if context is not None else None,
            # the contacts the user gave, apart from those the jorb adds by writing to them (jorbs/graph.py)
            options_json=json.dumps({**(options or {}), "given_contacts": parties}), origin_thread=origin_thread,
            created_at=utcnow(), updated_at=utcnow(),
        )
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            s.add(row)
            s.flush()
            s.add_all(JorbContactRow(jorb_id=row.id, party=p) for p in parties)
        return row

    def get(self, jorb_id: str) -> JorbRow:
        with Session(self.engine, expire_on_commit=False) as s:
            row = s.get(JorbRow, jorb_id)
            if row is None:
                matches = list(s.scalars(select(JorbRow).where(JorbRow.id.like(f"{jorb_id}%")).limit(2)))
                row = matches[0] if len(matches) == 1 else None
            if row is None:
                raise JorbNotFound(f"no jorb {jorb_id!r} (see `jarvis jorbs list`)")
            return row

    def update(self, jorb_id: str, *, status: JorbStatus | str | None = None, error: str | None | _Keep = KEEP,
               pause_reason: str | None | _Keep = KEEP, waiting_channel: str | None | _Keep = KEEP,
               waiting_party: str | None | _Keep = KEEP, policy: str | None = None, result: Any = KEEP,
               contacts: list[str] | None = None, steps: int | None = None, tokens: int | None = None) -> None:
        """Change what is given (None clears error, pause reason and what the jorb waits for; KEEP, the default,
        leaves a field as it is). A status that is not a JorbStatus is refused (ValueError) before anything is
        written."""
        values: dict[str, Any] = {"updated_at": utcnow()}
        if status is not None:
            values["status"] = JorbStatus(status).value
        for name, value in (("error", error), ("pause_reason", pause_reason), ("waiting_channel", waiting_channel),
                            ("waiting_party", waiting_party)):
            if value is not KEEP:
                values[name] = value
        if policy is not None:
            values["policy"] = policy
        if result is not KEEP:
            values["result_json"] = json.dumps(result, default=str)
        if contacts is not None:
            values["contacts_json"] = json.dumps(sorted(set(contacts)))
        if steps is not None:
            values["steps"] = steps
        if tokens is not None:
            values["tokens"] = tokens
        with Session(self.engine) as s, s.begin():
            s.execute(update(JorbRow).where(JorbRow.id == jorb_id).values(**values))

    def add_contact(self, jorb_id: str, party: str) -> None:
        row = self.get(jorb_id)
        normalized = normalize_party(party)
        if normalized and normalized not in row.contacts:
            self.update(jorb_id, contacts=[*row.contacts, normalized])
            with Session(self.engine) as s, s.begin():
                s.add(JorbContactRow(jorb_id=row.id, party=normalized))

    def jorbs_with_contact(self, party: str, statuses: tuple[str, ...] = OPEN_STATUSES) -> list[JorbRow]:
        """Open jorbs that have `party` (normalized) as a contact: an indexed lookup."""
        who = normalize_party(party)
        if not who:
            return []
        with Session(self.engine, expire_on_commit=False) as s:
            q = (select(JorbRow).join(JorbContactRow, JorbContactRow.jorb_id == JorbRow.id)
                 .where(JorbContactRow.party == who, JorbRow.status.in_(statuses)))
            return list(s.scalars(q))

    def list(self, statuses: tuple[str, ...] | None = None, mode: str | None = None, limit: int = 500) -> list[JorbRow]:
        with Session(self.engine, expire_on_commit=False) as s:
            q = select(JorbRow).order_by(JorbRow.updated_at.desc()).limit(limit)
            if statuses:
                q = q.where(JorbRow.status.in_(statuses))
            if mode:
                q = q.where(JorbRow.mode == mode)
            return list(s.scalars(q))

    def open_jorbs(self) -> list[JorbRow]:
        return self.list(statuses=OPEN_STATUSES, limit=100_000)

    def jorb_for_thread(self, channel: str, thread_key: str) -> JorbRow | None:
        """The open jorb that sent a message in this conversation thread (an email thread, a Telegram chat)."""
        with Session(self.engine, expire_on_commit=False) as s:
            jorb_id = s.scalar(select(ChannelMessageRow.jorb_id).where(
                ChannelMessageRow.direction == "out", ChannelMessageRow.channel == channel,
                ChannelMessageRow.thread_key == thread_key, ChannelMessageRow.jorb_id.is_not(None))
                .order_by(ChannelMessageRow.id.desc()).limit(1))
            if jorb_id is None:
                return None
            row = s.get(JorbRow, jorb_id)
            return row if row is not None and row.status in OPEN_STATUSES else None

    def last_thread(self, jorb_id: str, channel: str, party: str) -> str | None:
        """The conversation thread this jorb last used with `party` on `channel` (so replies stay in it)."""
        who = normalize_party(party)
        with Session(self.engine) as s:
            return s.scalar(select(ChannelMessageRow.thread_key).where(
                ChannelMessageRow.jorb_id == jorb_id, ChannelMessageRow.channel == channel,
                ChannelMessageRow.party == who, ChannelMessageRow.thread_key.is_not(None))
                .order_by(ChannelMessageRow.id.desc()).limit(1))

    def open_threads(self, channel: str) -> list[tuple[str, Any]]:
        """(thread key, first message time) of the conversations open jorbs have written in on `channel`."""
        from sqlalchemy import func

        with Session(self.engine) as s:
            rows = s.execute(select(ChannelMessageRow.thread_key, func.min(ChannelMessageRow.created_at))
                             .join(JorbRow, JorbRow.id == ChannelMessageRow.jorb_id)
                             .where(ChannelMessageRow.direction == "out", ChannelMessageRow.channel == channel,
                                    ChannelMessageRow.thread_key.is_not(None), JorbRow.status.in_(OPEN_STATUSES))
                             .group_by(ChannelMessageRow.thread_key))
            return [(key, first if first is None or first.tzinfo else first.replace(tzinfo=timezone.utc))
                    for key, first in rows]

    # -- channel messages ----------------------------------------------------------------------------
    def log_message(self, *, direction: str, channel: str, party: str, text: str, status: str, jorb_id: str | None = None,
                    reasoning: str | None = None, is_user: bool = False, external_id: str | None = None,
                    thread_key: str | None = None) -> ChannelMessageRow:
        row = ChannelMessageRow(direction=direction, channel=channel, party=normalize_party(party) or party, text=text,
                                status=status, jorb_id=jorb_id, reasoning=reasoning, is_user=int(is_user),
                                external_id=external_id, thread_key=thread_key, created_at=utcnow())
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            s.add(row)
        return row

    def message(self, message_id: int) -> ChannelMessageRow | None:
        with Session(self.engine, expire_on_commit=False) as s:
            return s.get(ChannelMessageRow, message_id)

    def set_message(self, message_id: int, **values: Any) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(update(ChannelMessageRow).where(ChannelMessageRow.id == message_id).values(**values))

    def take_pending(self, jorb_id: str) -> list[ChannelMessageRow]:
        """Inbound messages routed to the jorb and not yet seen by it, oldest first; marked delivered."""
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            rows = list(s.scalars(select(ChannelMessageRow).where(
                ChannelMessageRow.jorb_id == jorb_id, ChannelMessageRow.direction == "in",
                ChannelMessageRow.status == "pending").order_by(ChannelMessageRow.id)))
            for r in rows:
                r.status = "delivered"
                r.delivered_at = utcnow()
            return rows

    def has_pending(self, jorb_id: str) -> bool:
        with Session(self.engine) as s:
            return s.scalar(select(ChannelMessageRow.id).where(
                ChannelMessageRow.jorb_id == jorb_id, ChannelMessageRow.direction == "in",
                ChannelMessageRow.status == "pending").limit(1)) is not None

    def waiting_with_pending(self) -> list[str]:
        """Jorbs waiting for a reply that has already come in (an indexed join, cheap when there are none)."""
        with Session(self.engine) as s:
            q = (select(JorbRow.id).join(ChannelMessageRow, ChannelMessageRow.jorb_id == JorbRow.id)
                 .where(JorbRow.status == JorbStatus.AWAITING_REPLY, ChannelMessageRow.direction == "in",
                        ChannelMessageRow.status == "pending").distinct())
            return list(s.scalars(q))

    def messages(self, *, jorb_id: str | None = None, statuses: tuple[str, ...] | None = None,
                 direction: str | None = None, limit: int = 200) -> list[ChannelMessageRow]:
        with Session(self.engine, expire_on_commit=False) as s:
            q = select(ChannelMessageRow).order_by(ChannelMessageRow.id.desc()).limit(limit)
            if jorb_id:
                q = q.where(ChannelMessageRow.jorb_id == jorb_id)
            if statuses:
                q = q.where(ChannelMessageRow.status.in_(statuses))
            if direction:
                q = q.where(ChannelMessageRow.direction == direction)
            return list(reversed(list(s.scalars(q))))
