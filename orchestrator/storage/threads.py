"""The thread index: one row per conversation (title, status, times) so listing threads never scans
checkpoints, and helpers to read a thread's messages and pending confirmations from its checkpoint."""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqlalchemy import DateTime, Integer, String, Text, bindparam, case, delete, desc, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Mapped, Session, mapped_column

from orchestrator.storage import writer
from orchestrator.core.config import Settings
from orchestrator.storage.engines import Base, StatusText, jarvis_engine, utcnow
from orchestrator.storage.prepared import Prepared

if TYPE_CHECKING:  # LangChain's messages are imported where a message is read: `jarvis pending` reads no message
    from langchain_core.messages import BaseMessage


class ThreadStatus(StrEnum):
    """What a thread is doing; the index refuses any other value (ThreadIndex.touch)."""

    IDLE = "idle"  # nothing runs, nothing waits
    RUNNING = "running"  # a turn (or a jorb step) runs
    WAITING = "waiting"  # a confirmation or a question waits for the user


IDLE, RUNNING, WAITING = ThreadStatus.IDLE, ThreadStatus.RUNNING, ThreadStatus.WAITING


class ThreadRow(Base):
    __tablename__ = "threads"

    thread_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), default="chat")
    title: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(StatusText(ThreadStatus), default=IDLE, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)


class ArchivedMessageRow(Base):
    """Messages folded into a thread's summary, moved out of the live state (history.py), kept readable."""

    __tablename__ = "message_archive"

    thread_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    message_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, index=True)
    data: Mapped[str] = mapped_column(Text)


@dataclass
class ThreadInfo:
    thread_id: str
    kind: str
    title: str
    status: str
    created_at: datetime
    updated_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"thread_id": self.thread_id, "kind": self.kind, "title": self.title, "status": self.status,
                "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat()}


def _info(row: ThreadRow) -> ThreadInfo:
    return ThreadInfo(row.thread_id, row.kind, row.title, row.status, row.created_at, row.updated_at)


@functools.cache
def _upsert(dialect: str) -> Prepared:
    """touch's statement, built and compiled once per dialect (prepared.py: this runs after every turn): an update
    keeps the row's status when none is given (new_status NULL) and its title once it has one (a title is only ever
    set once)."""
    table = ThreadRow.__table__
    stmt = (sqlite_insert if dialect == "sqlite" else pg_insert)(table).values(
        thread_id=bindparam("thread_id"), kind=bindparam("kind"), title=bindparam("title"), status=bindparam("status"),
        created_at=bindparam("now"), updated_at=bindparam("now"))
    return Prepared(stmt.on_conflict_do_update(index_elements=["thread_id"], set_={
        "updated_at": stmt.excluded.updated_at,
        "status": func.coalesce(bindparam("new_status", type_=String), table.c.status),
        "title": case((table.c.title == "", stmt.excluded.title), else_=table.c.title),
    }))


# touch_later's writes not yet made, by database and thread: one map for every ThreadIndex of the process, so
# that a merged write still carries the last status whichever instance asked for it.
_pending: dict[tuple[str, str], dict[str, Any]] = {}
_pending_lock = threading.Lock()


class ThreadIndex:
    def __init__(self, settings: Settings):
        self.engine = jarvis_engine(settings)

    def touch(self, thread_id: str, *, title: str | None = None, status: ThreadStatus | str | None = None,
              kind: str = "chat") -> None:
        """Create the thread's row or update it: one upsert statement (this runs on every turn). A status that is
        not a ThreadStatus is refused (ValueError)."""
        status = ThreadStatus(status).value if status else None
        with self.engine.begin() as conn:
            self._touch_in(conn, thread_id, title=title, status=status, kind=kind)

    def _touch_in(self, conn: Any, thread_id: str, *, title: str | None, status: str | None, kind: str) -> None:
        _upsert(self.engine.dialect.name).run(conn, {
            "thread_id": thread_id, "kind": kind, "title": (title or "")[:200], "status": status or IDLE.value,
            "now": utcnow(), "new_status": status})

    def touch_later(self, thread_id: str, *, title: str | None = None, status: ThreadStatus | str | None = None,
                    kind: str = "chat") -> None:
        """`touch` off the hot path, on the one writer thread (writer.py): the turn neither waits for the write nor
        for SQLite's lock, which the writer may hold for the last turn's telemetry (a wait of 1 ms or more, the
        busy handler's first sleep). Readers here flush the writer first; the status is checked now. Touches of a
        thread still queued are one write: the first title and kind (a title is only ever set once), the last
        status. The write shares its transaction with the turn's run (telemetry.py)."""
        status = ThreadStatus(status) if status else None
        key = (str(self.engine.url), thread_id)
        with _pending_lock:
            queued = _pending.get(key)
            if queued is not None:
                queued.update(title=queued["title"] or title, status=status or queued["status"])
                return
            _pending[key] = {"title": title, "status": status, "kind": kind}
        taken: dict[str, Any] = {}

        def write(conn: Any) -> None:
            if not taken:  # the first time it runs; made again (writer.py) with the same values
                with _pending_lock:
                    taken.update(_pending.pop(key))
            status = taken["status"]
            self._touch_in(conn, thread_id, title=taken["title"], status=status.value if status else None,
                           kind=taken["kind"])

        writer.submit_in(self.engine, write)

    def set_status_later(self, thread_id: str, status: ThreadStatus) -> None:
        self.touch_later(thread_id, status=status)

    def get(self, thread_id: str) -> ThreadInfo | None:
        writer.flush()
        with Session(self.engine) as s:
            row = s.get(ThreadRow, thread_id)
            return _info(row) if row else None

    def list(self, limit: int = 50, kind: str | None = None, statuses: tuple[str, ...] | None = None,
             title: str | None = None) -> list[ThreadInfo]:
        """Most recent first. `title`: only threads whose title contains it (any case)."""
        writer.flush()
        with Session(self.engine) as s:
            q = select(ThreadRow).order_by(desc(ThreadRow.updated_at)).limit(limit)
            if kind:
                q = q.where(ThreadRow.kind == kind)
            if statuses:
                q = q.where(ThreadRow.status.in_(statuses))
            if title:
                q = q.where(func.lower(ThreadRow.title).contains(title.lower(), autoescape=True))
            return [_info(r) for r in s.scalars(q)]

    def rename(self, thread_id: str, title: str) -> ThreadInfo | None:
        """A title the user chose (None when there is no such thread)."""
        writer.flush()  # the row of a thread whose first turn just ran may still be queued
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            row = s.get(ThreadRow, thread_id)
            if row is None:
                return None
            row.title = title
            return _info(row)

    def archive(self, thread_id: str, messages: list[BaseMessage]) -> None:
        """Append messages to the thread's archive, once each (a re-run stores nothing twice)."""
        if not messages:
            return
        from langchain_core.messages import messages_to_dict

        with Session(self.engine) as s, s.begin():
            known = set(s.scalars(select(ArchivedMessageRow.message_id).where(
                ArchivedMessageRow.thread_id == thread_id,
                ArchivedMessageRow.message_id.in_([m.id for m in messages]))))
            start = s.scalar(select(func.count()).select_from(ArchivedMessageRow)
                             .where(ArchivedMessageRow.thread_id == thread_id)) or 0
            for offset, m in enumerate(m for m in messages if m.id not in known):
                s.add(ArchivedMessageRow(thread_id=thread_id, message_id=m.id, position=start + offset,
                                         data=json.dumps(messages_to_dict([m])[0], default=str)))

    def archived(self, thread_id: str) -> list[BaseMessage]:
        from langchain_core.messages import messages_from_dict

        with Session(self.engine) as s:
            rows = s.scalars(select(ArchivedMessageRow.data).where(ArchivedMessageRow.thread_id == thread_id)
                             .order_by(ArchivedMessageRow.position))
            return messages_from_dict([json.loads(d) for d in rows])

    def delete(self, thread_id: str) -> None:
        """Forget a thread: its row and the messages folded out of its checkpoint (they were its history too)."""
        writer.flush()  # a queued touch of its last turn would bring the row back
        with Session(self.engine) as s, s.begin():
            row = s.get(ThreadRow, thread_id)
            if row is not None:
                s.delete(row)
            s.execute(delete(ArchivedMessageRow).where(ArchivedMessageRow.thread_id == thread_id))


def message_view(m: BaseMessage) -> dict[str, Any]:
    """A plain dict of one message for the CLI and the API."""
    from langchain_core.messages import AIMessage, ToolMessage

    view: dict[str, Any] = {"id": m.id, "type": m.type, "content": m.text if hasattr(m, "text") else str(m.content)}
    if isinstance(m, AIMessage):
        view["tool_calls"] = [{"id": c.get("id"), "name": c["name"], "args": c["args"]} for c in m.tool_calls]
        if m.invalid_tool_calls:
            view["invalid_tool_calls"] = [{"id": c.get("id"), "name": c.get("name"), "args": c.get("args"),
                                           "error": c.get("error")} for c in m.invalid_tool_calls]
    if isinstance(m, ToolMessage):
        view["tool_call_id"] = m.tool_call_id
        view["name"] = m.name
        view["status"] = m.status
    return view


def pending_confirmations(graph: Any, thread_id: str) -> list[dict[str, Any]]:
    """The confirmations a thread waits on, each with the interrupt id needed to resume it."""
    state = graph.get_state({"configurable": {"thread_id": thread_id}})
    pending = []
    for intr in state.interrupts:
        value = intr.value if isinstance(intr.value, dict) else {"value": intr.value}
        pending.append({"interrupt_id": intr.id, "thread_id": thread_id, **value})
    return pending
