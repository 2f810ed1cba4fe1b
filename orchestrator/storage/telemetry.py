"""Telemetry: every run of a graph (a turn, a resume) with its node timings, tool calls and token usage.

A LangChain callback handler follows the run tree: the root chain is the run, chains named like their
LangGraph node are node timings, tool runs are tool calls, chat-model ends carry token usage. Events are
buffered in memory and written in one transaction when the run ends, to keep the hot path cheap.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from sqlalchemy import DateTime, Float, ForeignKey, Integer, String, Text, desc, insert, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from orchestrator.core.config import Settings
from orchestrator.storage import writer
from orchestrator.core.secrets import redact
from .engines import Base, jarvis_engine
from .prepared import Prepared

log = logging.getLogger(__name__)


# The custom callback event the executor sends for a call refused before it ran (see executor._record_not_run).
NOT_RUN_EVENT = "jarvis_tool_not_run"

class RunRow(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    thread_id: Mapped[str | None] = mapped_column(String(256), index=True, nullable=True)
    graph: Mapped[str] = mapped_column(String(64), default="chat")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    status: Mapped[str] = mapped_column(String(16))  # ok, interrupted, error
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    model_calls: Mapped[int] = mapped_column(Integer, default=0)
    model_ms: Mapped[float] = mapped_column(Float, default=0.0)
    tool_calls: Mapped[int] = mapped_column(Integer, default=0)
    tool_errors: Mapped[int] = mapped_column(Integer, default=0)
    # model calls whose server reported no token usage (llama-cpp-python's server and others ignore the request
    # for it): their tokens are not in the figures above, which are then a floor, not a count
    unreported_calls: Mapped[int | None] = mapped_column(Integer, nullable=True)

    def outcome_text(self) -> str:
        """The run's status as the views and `jarvis runs` show it: a run whose tool calls failed finished, but it
        does not read "ok" beside its failures."""
        failed = self.tool_errors or 0
        if self.status == "ok" and failed:
            return f"finished, {failed} tool call{'' if failed == 1 else 's'} failed"
        return self.status

    def tokens_text(self) -> str:
        """The run's tokens as `jarvis runs` shows them, saying so when the server did not count some or all."""
        unreported = self.unreported_calls or 0
        if unreported and unreported >= (self.model_calls or 0):
            return "tokens unknown (the model server reported none)"
        shown = f"tokens {self.prompt_tokens}/{self.completion_tokens}"
        return shown + (f" (+{unreported} model call(s) the server did not count)" if unreported else "")


class RunEventRow(Base):
    __tablename__ = "run_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(64), ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))  # node, tool, model
    name: Mapped[str] = mapped_column(String(256))
    offset_ms: Mapped[float] = mapped_column(Float)
    duration_ms: Mapped[float] = mapped_column(Float)
    ok: Mapped[int] = mapped_column(Integer, default=1)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)


@dataclass
class _Run:
    id: str
    thread_id: str | None
    graph: str
    started_at: datetime
    t0: float
    events: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_calls: int = 0
    unreported_calls: int = 0
    model_ms: float = 0.0
    interrupted: bool = False


class TelemetryHandler(BaseCallbackHandler):
    """Attached to the compiled graph's config; thread-safe (parallel tool tasks run in threads)."""

    run_inline = True

    def __init__(self, settings: Settings, graph_name: str = "chat"):
        self.settings = settings
        self.graph_name = graph_name
        self._lock = threading.Lock()
        self._runs: dict[UUID, _Run] = {}
        self._root_of: dict[UUID, UUID] = {}
        self._open: dict[UUID, tuple[str, str, float]] = {}  # run_id -> (kind, name, start)

    # -- run tree ---------------------------------------------------------------------------------
    def _root(self, run_id: UUID, parent_run_id: UUID | None) -> UUID | None:
        if parent_run_id is None:
            return run_id if run_id in self._runs else None
        root = self._root_of.get(parent_run_id)
        if root is not None:
            self._root_of[run_id] = root
        return root

    def on_chain_start(self, serialized: dict | None, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       metadata: dict | None = None, **kwargs: Any) -> None:
        with self._lock:
            if parent_run_id is None:
                thread = (metadata or {}).get("thread_id")
                self._runs[run_id] = _Run(str(uuid.uuid4()), str(thread) if thread else None, self.graph_name,
                                          datetime.now(timezone.utc), time.perf_counter())
                self._root_of[run_id] = run_id
                return
            root = self._root(run_id, parent_run_id)
            name = kwargs.get("name") or ""
            if root is not None and metadata and metadata.get("langgraph_node") == name and name not in ("__start__",):
                self._open[run_id] = ("node", name, time.perf_counter())

    def _close(self, run_id: UUID, ok: bool, detail: Any = None) -> None:
        opened = self._open.pop(run_id, None)
        root = self._root_of.get(run_id)
        if opened is None or root is None or root not in self._runs:
            return
        kind, name, start = opened
        run = self._runs[root]
        end = time.perf_counter()
        run.events.append({"kind": kind, "name": name, "offset_ms": (start - run.t0) * 1000,
                           "duration_ms": (end - start) * 1000, "ok": ok,
                           "detail": redact(detail) if isinstance(detail, str) else detail})
        if kind == "model":
            run.model_ms += (end - start) * 1000

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        with self._lock:
            if parent_run_id is None and run_id in self._runs:
                interrupted = isinstance(outputs, dict) and "__interrupt__" in outputs
                run = self._runs[run_id]
                self._finish(run_id, "interrupted" if interrupted or run.interrupted else "ok", None)
                return
            self._close(run_id, True)
            self._root_of.pop(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        from langgraph.errors import GraphBubbleUp

        bubble = isinstance(error, GraphBubbleUp)
        with self._lock:
            if parent_run_id is None and run_id in self._runs:
                self._finish(run_id, "interrupted" if bubble else "error", None if bubble else str(error)[:2000])
                return
            root = self._root_of.get(run_id)
            if bubble and root in self._runs:
                self._runs[root].interrupted = True
            self._close(run_id, bubble, "interrupted" if bubble else str(error)[:500])
            self._root_of.pop(run_id, None)

    def on_tool_start(self, serialized: dict | None, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                      **kwargs: Any) -> None:
        with self._lock:
            if self._root(run_id, parent_run_id) is not None:
                name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
                self._open[run_id] = ("tool", name, time.perf_counter())

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._close(run_id, True)
            self._root_of.pop(run_id, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._close(run_id, False, str(error)[:500])
            self._root_of.pop(run_id, None)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name != NOT_RUN_EVENT or not isinstance(data, dict):
            return
        with self._lock:
            root = self._root_of.get(run_id)
            if root is None or root not in self._runs:
                return
            run = self._runs[root]
            run.events.append({"kind": "tool", "name": str(data.get("tool") or "tool"),
                               "offset_ms": (time.perf_counter() - run.t0) * 1000, "duration_ms": 0.0,
                               "ok": bool(data.get("ok")), "detail": redact(f"not run: {data.get('reason') or ''}")})

    def on_chat_model_start(self, serialized: dict | None, messages: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                            **kwargs: Any) -> None:
        with self._lock:
            if self._root(run_id, parent_run_id) is not None:
                self._open[run_id] = ("model", kwargs.get("name") or "chat_model", time.perf_counter())

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            root = self._root_of.get(run_id)
            prompt = completion = 0
            reported = False
            for gens in getattr(response, "generations", []) or []:
                for gen in gens:
                    usage = getattr(getattr(gen, "message", None), "usage_metadata", None)
                    reported = reported or bool(usage)
                    usage = usage or {}
                    prompt += int(usage.get("input_tokens", 0) or 0)
                    completion += int(usage.get("output_tokens", 0) or 0)
            if root is not None and root in self._runs:
                run = self._runs[root]
                run.prompt_tokens += prompt
                run.completion_tokens += completion
                run.model_calls += 1
                run.unreported_calls += 0 if reported else 1
            self._close(run_id, True, {"prompt_tokens": prompt, "completion_tokens": completion})
            self._root_of.pop(run_id, None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._close(run_id, False, str(error)[:500])
            self._root_of.pop(run_id, None)

    # -- persistence --------------------------------------------------------------------------------
    def _finish(self, root_id: UUID, status: str, error: str | None) -> None:
        error = redact(error) if error else error  # an error can quote a connection URL with its password
        run = self._runs.pop(root_id)
        self._root_of = {k: v for k, v in self._root_of.items() if v != root_id}
        duration = (time.perf_counter() - run.t0) * 1000
        writer.submit_in(lambda: jarvis_engine(self.settings),  # found off the event loop: it can touch the disk
                         lambda conn: self._write(conn, run, status, error, duration))

    def _write(self, conn: Any, run: _Run, status: str, error: str | None, duration: float) -> None:
        # In the writer's transaction (with the thread's status), the events in one executemany, as prepared
        # statements (prepared.py): this runs after every turn, on the writer thread, whose time Python takes from
        # whatever runs then; the ORM unit of work took ten times as long as Core, Core twice as long as this.
        tools = [e for e in run.events if e["kind"] == "tool"]
        _INSERT_RUN.run(conn, dict(
            id=run.id, thread_id=run.thread_id, graph=run.graph, started_at=run.started_at,
            duration_ms=duration, status=status, error=error, prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens, model_calls=run.model_calls, model_ms=run.model_ms,
            tool_calls=len(tools), tool_errors=sum(1 for e in tools if not e["ok"]),
            unreported_calls=run.unreported_calls))
        _INSERT_EVENTS.run(conn, [
            {"run_id": run.id, "seq": seq, "kind": e["kind"], "name": e["name"], "offset_ms": e["offset_ms"],
             "duration_ms": e["duration_ms"], "ok": int(e["ok"]),
             "detail": json.dumps(e["detail"]) if e["detail"] is not None else None}
            for seq, e in enumerate(run.events)])


_INSERT_RUN = Prepared(insert(RunRow.__table__), [c.name for c in RunRow.__table__.columns])
_INSERT_EVENTS = Prepared(insert(RunEventRow.__table__),
                          ["run_id", "seq", "kind", "name", "offset_ms", "duration_ms", "ok", "detail"])


def list_runs(settings: Settings, limit: int = 20, thread_id: str | None = None) -> list[RunRow]:
    writer.flush()  # runs of this process still queued
    with Session(jarvis_engine(settings)) as s:
        q = select(RunRow).order_by(desc(RunRow.started_at)).limit(limit)
        if thread_id:
            q = q.where(RunRow.thread_id == thread_id)
        rows = list(s.scalars(q))
        s.expunge_all()
        return rows


def get_run(settings: Settings, run_id: str) -> tuple[RunRow, list[RunEventRow]] | None:
    writer.flush()
    with Session(jarvis_engine(settings)) as s:
        run = s.get(RunRow, run_id)
        if run is None:
            matches = list(s.scalars(select(RunRow).where(RunRow.id.like(f"{run_id}%")).limit(2)))
            run = matches[0] if len(matches) == 1 else None
        if run is None:
            return None
        events = list(s.scalars(select(RunEventRow).where(RunEventRow.run_id == run.id).order_by(RunEventRow.seq)))
        s.expunge_all()
        return run, events
