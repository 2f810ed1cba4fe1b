"""Tables of the jorbs: one row per jorb (what lists and routing read without opening checkpoints) and the
log of channel messages in both directions (the inbox is the inbound rows no jorb has claimed)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from orchestrator.core.ids import jorb_thread_id
from orchestrator.storage.engines import Base, StatusText, utcnow
from .schema import JorbStatus


class JorbRow(Base):
    __tablename__ = "jorbs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    plan: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(StatusText(JorbStatus), index=True)
    mode: Mapped[str] = mapped_column(String(16), default="script")  # script | mission
    policy: Mapped[str] = mapped_column(String(64), default="llm")
    contacts_json: Mapped[str] = mapped_column(Text, default="[]")
    waiting_channel: Mapped[str | None] = mapped_column(String(32), nullable=True)
    waiting_party: Mapped[str | None] = mapped_column(String(256), nullable=True)
    pause_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    result_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    autonomy_json: Mapped[str] = mapped_column(Text, default="{}")
    context_json: Mapped[str | None] = mapped_column(Text, nullable=True)  # allowed capabilities; null = all
    options_json: Mapped[str] = mapped_column(Text, default="{}")  # mode-specific (mission workspace...)
    origin_thread: Mapped[str | None] = mapped_column(String(256), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)

    @property
    def thread_id(self) -> str:
        return jorb_thread_id(self.id)

    @property
    def contacts(self) -> list[str]:
        return json.loads(self.contacts_json or "[]")

    @property
    def autonomy(self) -> dict[str, str]:
        return json.loads(self.autonomy_json or "{}")

    @property
    def context(self) -> list[str] | None:
        return json.loads(self.context_json) if self.context_json else None

    @property
    def options(self) -> dict[str, Any]:
        return json.loads(self.options_json or "{}")

    @property
    def result(self) -> Any:
        return json.loads(self.result_json) if self.result_json else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "plan": self.plan, "status": self.status, "mode": self.mode,
            "policy": self.policy, "contacts": self.contacts, "waiting_channel": self.waiting_channel,
            "waiting_party": self.waiting_party, "pause_reason": self.pause_reason, "result": self.result,
            "error": self.error, "steps": self.steps, "tokens": self.tokens, "autonomy": self.autonomy,
            "context": self.context, "options": self.options, "thread_id": self.thread_id,
            "origin_thread": self.origin_thread, "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


class JorbContactRow(Base):
    """Who each jorb talks to, normalized and indexed, so routing a message is a lookup, not a scan."""

    __tablename__ = "jorb_contacts"

    jorb_id: Mapped[str] = mapped_column(String(32), ForeignKey("jorbs.id", ondelete="CASCADE"), primary_key=True)
    party: Mapped[str] = mapped_column(String(256), primary_key=True, index=True)


class ChannelMessageRow(Base):
    __tablename__ = "channel_messages"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    direction: Mapped[str] = mapped_column(String(8))  # in | out
    channel: Mapped[str] = mapped_column(String(32))
    party: Mapped[str] = mapped_column(String(256), index=True)  # sender (in) or recipient (out), normalized
    text: Mapped[str] = mapped_column(Text)
    jorb_id: Mapped[str | None] = mapped_column(String(32), index=True, nullable=True)
    # in: pending (routed, not yet seen by the jorb) | delivered | unmatched | spam | ambiguous ; out: sent | failed
    status: Mapped[str] = mapped_column(String(16), index=True)
    reasoning: Mapped[str | None] = mapped_column(Text, nullable=True)  # why the switchboard routed it so
    is_user: Mapped[int] = mapped_column(Integer, default=0)  # the user's own intervention in a jorb's conversation
    external_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    thread_key: Mapped[str | None] = mapped_column(String(256), nullable=True)  # e.g. an email thread id
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "direction": self.direction, "channel": self.channel, "party": self.party,
            "text": self.text, "jorb_id": self.jorb_id, "status": self.status, "reasoning": self.reasoning,
            "is_user": bool(self.is_user), "external_id": self.external_id, "thread_key": self.thread_key,
            "created_at": self.created_at.isoformat(),
        }

