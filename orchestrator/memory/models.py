"""The memory's tables in the jarvis database (SQLite or PostgreSQL, through storage.engines): entities, facts
about them, relations between them, and a generation counter that tells other processes' vector caches the
memory changed.

Every fact and relation carries its provenance (where it came from, whether that source was trusted, when it
was learned and last confirmed). What a column may hold is checked here, at the storage boundary: a source kind
is a member of SourceKind, an entity kind a short lowercase name (which names are allowed is the config's,
`memory.kinds`, checked by the store).
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (Boolean, ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint)
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from orchestrator.reminders.models import UTCDateTime  # aware UTC in and out, on both backends
from orchestrator.storage.engines import Base, StatusText, utcnow


class SourceKind(StrEnum):
    USER = "user"              # the user's own words in a conversation
    CONTENT = "content"        # drawn from content read in a conversation (a document, an email, a web page)
    MANUAL = "manual"          # written by the user in the Memory view or `jarvis memory`
    IMPORT = "import"          # `jarvis memory import`
    EXTRACTION = "extraction"  # proposed from a finished conversation, kept after the user approved


_KIND = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class KindName(TypeDecorator):
    """An entity kind: a lowercase identifier, refused otherwise before it reaches the database."""

    impl = String
    cache_ok = True

    def __init__(self) -> None:
        super().__init__(32)

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not _KIND.match(value):
            raise ValueError(f"entity kind {value!r} is not a lowercase name (a-z, 0-9, _; at most 32)")
        return value


class MemoryEntity(Base):
    __tablename__ = "memory_entities"
    __table_args__ = (UniqueConstraint("kind", "name_key", name="uq_memory_entity_kind_name"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(KindName())
    name: Mapped[str] = mapped_column(String(200))
    name_key: Mapped[str] = mapped_column(String(200), index=True)  # normalised name: how a message names it
    link: Mapped[str | None] = mapped_column(String(500), nullable=True)  # jorb contact, calendar event, document
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class _Provenance:
    source_kind: Mapped[SourceKind] = mapped_column(StatusText(SourceKind))
    source_ref: Mapped[str | None] = mapped_column(String(500), nullable=True)  # thread id, document, file
    source_detail: Mapped[str | None] = mapped_column(String(500), nullable=True)  # the call, the message
    trusted: Mapped[bool] = mapped_column(Boolean)
    learned_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class MemoryFact(_Provenance, Base):
    __tablename__ = "memory_facts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    entity_id: Mapped[int | None] = mapped_column(ForeignKey("memory_entities.id", ondelete="CASCADE"),
                                                  nullable=True, index=True)
    text: Mapped[str] = mapped_column(Text)
    search_text: Mapped[str] = mapped_column(Text)  # the entity's name and the fact: what keyword search reads
    confirmed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


class MemoryRelation(_Provenance, Base):
    __tablename__ = "memory_relations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    subject_id: Mapped[int] = mapped_column(ForeignKey("memory_entities.id", ondelete="CASCADE"), index=True)
    predicate: Mapped[str] = mapped_column(String(64))
    object_id: Mapped[int] = mapped_column(ForeignKey("memory_entities.id", ondelete="CASCADE"), index=True)


class MemoryMeta(Base):
    __tablename__ = "memory_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))


class ProposalStatus(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class MemoryProposal(Base):
    """A fact the extraction proposed from a finished turn: stored as a fact only when the user accepts it."""

    __tablename__ = "memory_proposals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fact: Mapped[str] = mapped_column(Text)
    about: Mapped[str | None] = mapped_column(String(200), nullable=True)
    kind: Mapped[str | None] = mapped_column(KindName(), nullable=True)
    thread_id: Mapped[str] = mapped_column(String(200), index=True)
    status: Mapped[ProposalStatus] = mapped_column(StatusText(ProposalStatus), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
