"""The effects ledger: every side-effecting execution, recorded before it starts and after it ends.

The idempotency key names the call (thread, model message, tool_call_id; or jorb, step, call index).
A replayed call whose row is `completed` gets the recorded result and is not executed again; a row left
`started` by a process that died is "in doubt": it may have happened, and only the user can say whether
to run it again (see executor.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import DateTime, Integer, String, Text, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from orchestrator.storage.claims import worker_id
from orchestrator.core.config import Settings
from orchestrator.core.supervisor import pid_alive
from orchestrator.storage.engines import Base, jarvis_engine, utcnow
from orchestrator.storage.workers import ensure_heartbeat, seems_alive

STARTED, COMPLETED, SKIPPED = "started", "completed", "skipped"


class LedgerRow(Base):
    __tablename__ = "effects_ledger"

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    thread_id: Mapped[str] = mapped_column(String(256), index=True)
    tool: Mapped[str] = mapped_column(String(256))
    args_json: Mapped[str] = mapped_column(Text)
    side_effects: Mapped[str] = mapped_column(Text, default="[]")
    status: Mapped[str] = mapped_column(String(16), index=True)
    result_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    result_ok: Mapped[int] = mapped_column(Integer, default=1)
    pid: Mapped[int] = mapped_column(Integer)
    host: Mapped[str] = mapped_column(String(256))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    worker: Mapped[str | None] = mapped_column(String(160), nullable=True)  # claims.worker_id() of the starter
    # call_fingerprint of the call as the work made it, before any edit by the user: a re-run that makes another
    # call under this key is not answered with this row's result (see executor.ToolExecutor._prepare)
    requested: Mapped[str | None] = mapped_column(String(64), nullable=True)


class AskedRow(Base):
    """A call the user was asked about, in the order asked under one key: an answer is bound to the call shown.

    Work that re-runs before it reaches its question (a jorb script, a mission round) could otherwise make a
    different call at the same point and take the approval given to the first (see executor.ToolExecutor)."""

    __tablename__ = "asked_calls"

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    summary: Mapped[str] = mapped_column(Text)
    asked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


@dataclass(frozen=True)
class AskedCall:
    fingerprint: str
    summary: str
    asked_at: datetime | None = None  # aware UTC


def _aware(value: datetime | None) -> datetime | None:
    """A stored time as aware UTC (SQLite gives it back without its zone)."""
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def call_fingerprint(tool: str, args: dict[str, Any]) -> str:
    """What identifies a call for an approval: the tool and its canonical (validated) arguments."""
    canonical = json.dumps({"tool": tool, "args": args}, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class LedgerEntry:
    key: str
    thread_id: str
    tool: str
    args: dict[str, Any]
    side_effects: list[str]
    status: str
    result_text: str | None
    result_ok: bool
    pid: int
    host: str
    started_at: datetime
    remote_alive: bool = True  # for a call started on another host: its worker's heartbeat (workers.py)
    requested: str | None = None  # the fingerprint of the call as made (None in rows older than the column)

    @property
    def owner_alive(self) -> bool:
        """Whether the process that started the call is still running: the kernel says on this host, the
        worker's heartbeat on another."""
        if self.host != socket.gethostname():
            return self.remote_alive
        return pid_alive(self.pid)


def _entry(row: LedgerRow, settings: Settings) -> LedgerEntry:
    remote_alive = True
    if row.host != socket.gethostname() and row.status == STARTED:
        remote_alive = seems_alive(settings, row.worker)
    return LedgerEntry(
        key=row.key,
        thread_id=row.thread_id,
        tool=row.tool,
        args=json.loads(row.args_json),
        side_effects=json.loads(row.side_effects or "[]"),
        status=row.status,
        result_text=row.result_text,
        result_ok=bool(row.result_ok),
        pid=row.pid,
        host=row.host,
        started_at=row.started_at,
        remote_alive=remote_alive,
        requested=row.requested,
    )


class EffectsLedger:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.engine = jarvis_engine(settings)

    def get(self, key: str) -> LedgerEntry | None:
        with Session(self.engine) as s:
            row = s.get(LedgerRow, key)
            return _entry(row, self.settings) if row else None

    def begin(self, key: str, thread_id: str, tool: str, args: dict[str, Any], side_effects: list[str],
              requested: str | None = None) -> bool:
        """Record that the call starts now. False when a row for the key already exists. `requested`: the
        fingerprint of the call as the work made it (the arguments may since have been edited by the user)."""
        ensure_heartbeat(self.settings)  # so workers on other machines can tell when this one is gone
        row = LedgerRow(
            key=key,
            thread_id=thread_id,
            tool=tool,
            args_json=json.dumps(args, default=str, sort_keys=True),
            side_effects=json.dumps(side_effects),
            status=STARTED,
            pid=os.getpid(),
            host=socket.gethostname(),
            started_at=utcnow(),
            worker=worker_id(),
            requested=requested,
        )
        try:
            with Session(self.engine) as s, s.begin():
                s.add(row)
            return True
        except IntegrityError:
            return False

    def restart(self, key: str) -> None:
        """The user approved running an in-doubt call again: it is ours now."""
        ensure_heartbeat(self.settings)
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(LedgerRow)
                .where(LedgerRow.key == key)
                .values(status=STARTED, pid=os.getpid(), host=socket.gethostname(), started_at=utcnow(),
                        worker=worker_id())
            )

    def complete(self, key: str, result_text: str, ok: bool = True) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(LedgerRow)
                .where(LedgerRow.key == key)
                .values(status=COMPLETED, result_text=result_text, result_ok=int(ok), completed_at=utcnow())
            )

    def skip(self, key: str, note: str) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(LedgerRow)
                .where(LedgerRow.key == key)
                .values(status=SKIPPED, result_text=note, result_ok=0, completed_at=utcnow())
            )

    def in_doubt(self, thread_id: str | None = None) -> list[LedgerEntry]:
        """Calls started by a process that is gone and never completed: they may have happened."""
        with Session(self.engine) as s:
            q = select(LedgerRow).where(LedgerRow.status == STARTED)
            if thread_id:
                q = q.where(LedgerRow.thread_id == thread_id)
            entries = [_entry(r, self.settings) for r in s.scalars(q)]
        return [e for e in entries if not e.owner_alive]

    def asked(self, key: str) -> list[AskedCall]:
        """The calls asked about under `key`, in order: the n-th answer the work gets back was given to the n-th."""
        with Session(self.engine) as s:
            rows = s.scalars(select(AskedRow).where(AskedRow.key == key).order_by(AskedRow.seq))
            return [AskedCall(r.fingerprint, r.summary, _aware(r.asked_at)) for r in rows]

    def record_asked(self, key: str, seq: int, fingerprint: str, summary: str,
                     asked_at: datetime | None = None) -> None:
        """Record the question about to be asked (before the work parks on it). Idempotent per (key, seq)."""
        try:
            with Session(self.engine) as s, s.begin():
                s.add(AskedRow(key=key, seq=seq, fingerprint=fingerprint, summary=summary,
                               asked_at=asked_at or utcnow()))
        except IntegrityError:
            pass

    def forget_asked(self, key: str) -> None:
        """The call was answered and started: its questions are settled."""
        with Session(self.engine) as s, s.begin():
            s.execute(delete(AskedRow).where(AskedRow.key == key))

    def count_for_thread(self, thread_id: str) -> int:
        with Session(self.engine) as s:
            return len(list(s.scalars(select(LedgerRow.key).where(LedgerRow.thread_id == thread_id))))
