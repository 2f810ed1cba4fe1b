"""What the phone answers rest on, in the jarvis database: the one-time tokens sent out, who answered each
pending item first, and when the UI last looked at a thread.

An item (a pending confirmation) is named by `tools.answers.item_ref`: its thread, its interrupt, the ledger key of its call,
the tool and arguments hash, and why it is asked again if it is. The interrupt id says where the
graph waits; the rest says which call was shown, so a token answers the call it showed and nothing else, whatever
ids the graph gives the questions that follow (an edit refused and asked again, the next call of a script).

Tokens are stored as their SHA-256 only: reading the database does not give an answer to press. A token is used
once (`use_token`: a conditional UPDATE, one winner across processes) and is good only while its item is still
pending with the same ref (checked by remote.py), so it expires with the item.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from sqlalchemy import DateTime, String, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from orchestrator.core.config import Settings
from orchestrator.storage.engines import Base, jarvis_engine, utcnow
from orchestrator.tools.answers import item_ref
from orchestrator.tools.ledger import call_fingerprint


class ApprovalTokenRow(Base):
    __tablename__ = "approval_tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    ref: Mapped[str] = mapped_column(String(64), index=True)
    channel: Mapped[str] = mapped_column(String(16))
    thread_id: Mapped[str] = mapped_column(String(256))
    interrupt_id: Mapped[str] = mapped_column(String(128))
    key: Mapped[str] = mapped_column(String(512))
    tool: Mapped[str] = mapped_column(String(256))
    fingerprint: Mapped[str] = mapped_column(String(64))
    sent_to: Mapped[str] = mapped_column(String(320))
    message_id: Mapped[str | None] = mapped_column(String(128), nullable=True)  # Telegram message / Gmail thread
    sent_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    used_by: Mapped[str | None] = mapped_column(String(64), nullable=True)  # approve, deny, closed


class AnsweredRow(Base):
    """The first answer to an item, from any surface: the second is told "already answered"."""

    __tablename__ = "answered_items"

    ref: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(256), index=True)
    interrupt_id: Mapped[str] = mapped_column(String(128))
    tool: Mapped[str] = mapped_column(String(256))
    answer: Mapped[str] = mapped_column(String(16))
    via: Mapped[str] = mapped_column(String(32))
    answered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ItemSeenRow(Base):
    """When the notifier first saw an item waiting, and when it sent it."""

    __tablename__ = "approval_items_seen"

    ref: Mapped[str] = mapped_column(String(64), primary_key=True)
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    notified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class UiViewRow(Base):
    """When a UI session last showed a thread's pending items (the notifier leaves watched items alone)."""

    __tablename__ = "ui_thread_views"

    thread_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


def new_token() -> str:
    """120 random bits, in base32 (letters and digits 2-7) so a code quoted in an email survives any mail client."""
    return base64.b32encode(secrets.token_bytes(15)).decode("ascii")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.strip().upper().encode("ascii", "replace")).hexdigest()


@dataclass(frozen=True)
class Answered:
    answer: str
    via: str
    at: datetime

    def describe(self) -> str:
        return f"already answered ({self.answer}, from {self.via} at {self.at:%Y-%m-%d %H:%M} UTC)"


class AlreadyAnswered(Exception):
    def __init__(self, answered: Answered):
        super().__init__(answered.describe())
        self.answered = answered


class ApprovalStore:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.engine = jarvis_engine(settings)

    def ref(self, item: Mapping[str, Any]) -> str:
        return item_ref(item)

    # -- who answered first ----------------------------------------------------------------------------------
    def claim_answer(self, item: Mapping[str, Any], answer: str, via: str) -> str:
        """Record `via` as the one answering `item`; AlreadyAnswered (saying who and when) when another did.
        Returns the item's ref (for release_answer)."""
        ref = self.ref(item)
        try:
            with Session(self.engine) as s, s.begin():
                s.add(AnsweredRow(ref=ref, thread_id=str(item.get("thread_id")), interrupt_id=str(item.get("interrupt_id")),
                                  tool=str(item.get("tool") or item.get("type")), answer=answer, via=via, answered_at=utcnow()))
        except IntegrityError:
            first = self.answered(ref)
            raise AlreadyAnswered(first or Answered(answer="?", via="another surface", at=utcnow())) from None
        return ref

    def release_answer(self, ref: str) -> None:
        """The answer could not be applied (the jorb was busy): the item is open again."""
        with Session(self.engine) as s, s.begin():
            s.execute(delete(AnsweredRow).where(AnsweredRow.ref == ref))

    def answered(self, ref: str) -> Answered | None:
        with Session(self.engine) as s:
            row = s.get(AnsweredRow, ref)
            return Answered(row.answer, row.via, row.answered_at) if row else None

    def last_answer(self, thread_id: str, interrupt_id: str) -> Answered | None:
        """The latest answer given to a question of this interrupt (one interrupt may ask several in turn)."""
        with Session(self.engine) as s:
            row = s.scalars(select(AnsweredRow).where(AnsweredRow.thread_id == thread_id,
                                                      AnsweredRow.interrupt_id == interrupt_id)
                            .order_by(AnsweredRow.answered_at.desc()).limit(1)).first()
            return Answered(row.answer, row.via, row.answered_at) if row else None

    def answers_for_thread(self, thread_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """Where and when the thread's items were answered, newest first (the UI shows them)."""
        with Session(self.engine) as s:
            rows = s.scalars(select(AnsweredRow).where(AnsweredRow.thread_id == thread_id)
                             .order_by(AnsweredRow.answered_at.desc()).limit(limit))
            return [{"tool": r.tool, "answer": r.answer, "via": r.via, "at": r.answered_at.isoformat()} for r in rows]

    # -- tokens -------------------------------------------------------------------------------------------
    def issue(self, item: Mapping[str, Any], channel: str, sent_to: str) -> tuple[str, str]:
        """A new one-time token for `item` on `channel` -> (token, its hash)."""
        token = new_token()
        digest = token_hash(token)
        with Session(self.engine) as s, s.begin():
            s.add(ApprovalTokenRow(token_hash=digest, ref=self.ref(item), channel=channel,
                                   thread_id=str(item.get("thread_id")), interrupt_id=str(item.get("interrupt_id")),
                                   key=str(item.get("key") or ""), tool=str(item.get("tool") or ""),
                                   fingerprint=call_fingerprint(str(item.get("tool")), item.get("args") or {}),
                                   sent_to=sent_to, sent_at=utcnow()))
        return token, digest

    def sent(self, digest: str, message_id: str | None) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(update(ApprovalTokenRow).where(ApprovalTokenRow.token_hash == digest).values(message_id=message_id))

    def withdraw(self, digest: str) -> None:
        """Sending failed: the token was never seen by anyone."""
        with Session(self.engine) as s, s.begin():
            s.execute(delete(ApprovalTokenRow).where(ApprovalTokenRow.token_hash == digest))

    def token(self, token: str) -> ApprovalTokenRow | None:
        with Session(self.engine, expire_on_commit=False) as s:
            return s.get(ApprovalTokenRow, token_hash(token))

    def use_token(self, digest: str, used_by: str) -> bool:
        """Mark the token used; True for the one caller (of any process) that did."""
        with Session(self.engine) as s, s.begin():
            done = s.execute(update(ApprovalTokenRow)
                             .where(ApprovalTokenRow.token_hash == digest, ApprovalTokenRow.used_at.is_(None))
                             .values(used_at=utcnow(), used_by=used_by))
            return done.rowcount == 1

    def unuse_token(self, digest: str) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(update(ApprovalTokenRow).where(ApprovalTokenRow.token_hash == digest)
                      .values(used_at=None, used_by=None))

    def open_tokens(self, channel: str | None = None) -> list[ApprovalTokenRow]:
        with Session(self.engine, expire_on_commit=False) as s:
            q = select(ApprovalTokenRow).where(ApprovalTokenRow.used_at.is_(None))
            if channel:
                q = q.where(ApprovalTokenRow.channel == channel)
            return list(s.scalars(q))

    def sent_for(self, ref: str) -> list[dict[str, Any]]:
        """Where the item was sent: [{"channel", "to", "at", "used"}] (`jarvis pending`, the UI)."""
        with Session(self.engine) as s:
            rows = s.scalars(select(ApprovalTokenRow).where(ApprovalTokenRow.ref == ref).order_by(ApprovalTokenRow.sent_at))
            return [{"channel": r.channel, "to": r.sent_to, "at": r.sent_at.isoformat(), "used": r.used_by}
                    for r in rows if r.message_id is not None]

    # -- when items were seen -------------------------------------------------------------------------------
    def seen(self, ref: str) -> ItemSeenRow:
        """The item's record, made the first time it is seen."""
        with Session(self.engine, expire_on_commit=False) as s:
            row = s.get(ItemSeenRow, ref)
            if row is not None:
                return row
        try:
            with Session(self.engine, expire_on_commit=False) as s, s.begin():
                row = ItemSeenRow(ref=ref, first_seen=utcnow())
                s.add(row)
            return row
        except IntegrityError:
            with Session(self.engine, expire_on_commit=False) as s:
                return s.get(ItemSeenRow, ref)

    def mark_notified(self, ref: str) -> bool:
        """True for the one notifier (of any worker) that sends the item."""
        with Session(self.engine) as s, s.begin():
            done = s.execute(update(ItemSeenRow).where(ItemSeenRow.ref == ref, ItemSeenRow.notified_at.is_(None))
                             .values(notified_at=utcnow()))
            return done.rowcount == 1

    def ui_viewed(self, thread_id: str) -> None:
        try:
            with Session(self.engine) as s, s.begin():
                row = s.get(UiViewRow, thread_id)
                if row is None:
                    s.add(UiViewRow(thread_id=thread_id, seen_at=utcnow()))
                else:
                    row.seen_at = utcnow()
        except IntegrityError:  # another request recorded it at the same moment: seen either way
            pass

    def ui_seen_at(self, thread_id: str) -> datetime | None:
        with Session(self.engine) as s:
            return s.scalar(select(UiViewRow.seen_at).where(UiViewRow.thread_id == thread_id))
