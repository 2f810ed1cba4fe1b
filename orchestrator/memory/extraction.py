"""Facts proposed from a finished turn: the model reads the user's own message and lists what might be worth
remembering; each becomes a *proposal* the user accepts or rejects (`jarvis memory proposals|accept|reject`,
the Memory view). Nothing is stored as a fact without that answer.

It runs after the turn's answer, on a worker thread of its own (`memory.propose_from_turns`, off by default: it
costs one model call per turn). The model's reply is data: parsed as a JSON array, each entry checked (length,
entity kind), at most MAX_PROPOSALS kept; anything else is dropped, never retried.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import select

from orchestrator.core import json_bounds
from orchestrator.llm.answer_end import checked_reply
from orchestrator.storage import engines as storage
from .models import MemoryFact, MemoryProposal, ProposalStatus, SourceKind
from .store import MemoryError, MemoryStore, Provenance

log = logging.getLogger(__name__)

MAX_PROPOSALS = 5
EXTRACT_SYSTEM = (
    "You read one message the user wrote to their assistant and list the lasting facts about the user's life in it "
    "that would help in later conversations (people and their roles, places, projects, preferences, accounts). "
    "Leave out passing requests and anything the message quotes from elsewhere. Answer only a JSON array of objects "
    '{"fact": "one sentence", "about": "who or what, or null", "kind": "person|organisation|place|project|event|'
    'thing|topic or null"}; answer [] when there is nothing lasting.')
_ARRAY = re.compile(r"\[.*\]", re.S)


class Candidate(BaseModel):
    fact: str = Field(min_length=3, max_length=500)
    about: str | None = Field(None, max_length=200)
    kind: str | None = Field(None, max_length=32)


def parse_candidates(reply: str) -> list[Candidate]:
    found = _ARRAY.search(reply or "")
    if found is None:
        return []
    try:
        items = json_bounds.loads(found.group(0))
    except ValueError:  # not JSON, or nested too deep
        return []
    out: list[Candidate] = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(Candidate.model_validate(item))
        except ValidationError:
            continue
    return out[:MAX_PROPOSALS]


class Extractor:
    def __init__(self, store: MemoryStore):
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-extract")
        self._jobs: list[Future] = []

    def propose_later(self, thread_id: str, message: str, model: BaseChatModel) -> None:
        """After a turn: propose from the user's message on the worker thread (errors are logged, not raised)."""
        if message.strip():
            self._jobs = [j for j in self._jobs if not j.done()] + [
                self._pool.submit(self._safely, thread_id, message, model)]

    def wait(self) -> None:
        """Wait for the proposals under way (tests, a CLI process about to exit)."""
        for job in list(self._jobs):
            job.result()

    def _safely(self, thread_id: str, message: str, model: BaseChatModel) -> None:
        try:
            self.propose(thread_id, message, model)
        except Exception:  # noqa: BLE001 - a failed proposal must not touch the conversation
            log.exception("memory: could not propose facts from thread %s", thread_id)

    def propose(self, thread_id: str, message: str, model: BaseChatModel) -> list[int]:
        reply = model.invoke([SystemMessage(content=EXTRACT_SYSTEM), HumanMessage(content=message[:8000])])
        reply = checked_reply(reply, model, "the facts proposed from a message")  # a cut list proposes half a fact
        text = reply.text if hasattr(reply, "text") else str(reply.content)
        made: list[int] = []
        with self.store._session() as s, s.begin():
            for c in parse_candidates(text):
                fact = " ".join(c.fact.split())
                kind = (c.kind or "").strip().lower() or None
                if kind not in self.store.kinds:
                    kind = None
                known = s.scalars(select(MemoryFact.id).where(MemoryFact.text == fact)).first() or s.scalars(
                    select(MemoryProposal.id).where(MemoryProposal.fact == fact,
                                                    MemoryProposal.status == ProposalStatus.PENDING)).first()
                if known is not None:
                    continue
                row = MemoryProposal(fact=fact, about=(c.about or "").strip() or None, kind=kind, thread_id=thread_id,
                                     status=ProposalStatus.PENDING, created_at=storage.utcnow())
                s.add(row)
                s.flush()
                made.append(row.id)
        return made


def proposals(store: MemoryStore, status: ProposalStatus | None = ProposalStatus.PENDING) -> list[dict[str, Any]]:
    with store._session() as s:
        query = select(MemoryProposal).order_by(MemoryProposal.id)
        if status is not None:
            query = query.where(MemoryProposal.status == status)
        return [{"id": p.id, "fact": p.fact, "about": p.about, "kind": p.kind, "thread_id": p.thread_id,
                 "status": str(p.status), "created_at": p.created_at.isoformat()} for p in s.scalars(query)]


def answer_proposal(store: MemoryStore, proposal_id: int, accept: bool) -> dict[str, Any]:
    """The user's answer: accepted, the proposal becomes a fact (source `extraction`, trusted: the user said yes to
    their own words); rejected, it stays rejected. A proposal is answered once."""
    with store._session() as s:
        row = s.get(MemoryProposal, proposal_id)
        if row is None:
            raise MemoryError(f"there is no proposal {proposal_id} (`jarvis memory proposals` lists them)")
        if row.status != ProposalStatus.PENDING:
            raise MemoryError(f"proposal {proposal_id} was already {row.status}")
    out: dict[str, Any] = {"id": proposal_id, "status": "accepted" if accept else "rejected"}
    if accept:  # stored first: a fact the store refuses leaves the proposal pending
        out["fact_id"] = store.remember(row.fact, Provenance(SourceKind.EXTRACTION, True, f"thread {row.thread_id}"),
                                        about=row.about, kind=row.kind if row.about else None).id
    with store._session() as s, s.begin():
        s.get(MemoryProposal, proposal_id).status = ProposalStatus(out["status"])
    return out
