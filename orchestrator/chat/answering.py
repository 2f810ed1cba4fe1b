"""The one way an answer to a chat thread's confirmations is applied, whichever surface gave it: the web UI's
dialog (POST /api/threads/{id}/resume), a Telegram button or an email reply (App.answer_item), `jarvis approve`.

1. The answers are checked against what the thread waits for now (its checkpoint): an interrupt no longer pending
   is refused (NotPending), and so is one whose question changed since it was shown (`ref`: answers.check_ref).
2. The first answer to each question is recorded (approvals' `answered_items`): a second one, from another
   surface, is refused with "already answered (deny, from telegram at ...)", also while the first one's turn runs.
3. The thread's graph is resumed with the decisions through the process's TurnHub: the thread's claim (one turn
   at a time, across workers), and the UI sees the turn live. When the turn ends with the question still pending
   as it was (the answer never reached its call: the turn failed first), the record is withdrawn, so the question
   can be answered again rather than be "already answered" for ever; a record left by a process that died before
   it could withdraw it is set aside once no turn holds the thread and a claim's lease has passed.

Several confirmations of one turn (parallel tool calls) are separate questions. The UI's dialog shows them all and
answers them together (`every=True`). A phone answers the one call its message was about (`every=False`): LangGraph
resumes that call's task with the decision, the other tasks ask again under their own interrupt ids (the same
ones, so their messages and tokens stay good), and the turn goes on once the last of them is answered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta, timezone
from typing import Any, Mapping

from orchestrator.approvals.store import AlreadyAnswered, Answered, ApprovalStore
from orchestrator.storage.engines import utcnow
from orchestrator.storage.threads import pending_confirmations
from .live_turns import LiveTurn, TurnBusy, TurnHub
from .turns import resume_command

# The pending items by interrupt id -> {interrupt_id: resume value} (answers.resume_values, or the API's checks).
Resolve = Callable[[dict[str, dict[str, Any]]], dict[str, Any]]


class NotPending(Exception):
    """What was answered is not waiting any more (answered and done, or the turn moved on)."""


class Incomplete(Exception):
    """The dialog must answer every confirmation of the turn together."""


def _word(value: Any) -> str:
    """What the answer was, as recorded and shown: approve, edit, deny, skip."""
    return str(value.get("decision", "answer")) if isinstance(value, Mapping) else "answer"


class ThreadAnswers:
    """`graph`: the chat graph; `turns`: the process's TurnHub; `store`: where the first answers are recorded."""

    def __init__(self, graph: Any, turns: TurnHub, store: ApprovalStore):
        self.graph = graph
        self.turns = turns
        self.store = store

    def pending(self, thread_id: str) -> dict[str, dict[str, Any]]:
        return {p["interrupt_id"]: p for p in pending_confirmations(self.graph, thread_id)}

    def apply(self, thread_id: str, ids: set[str], resolve: Resolve, via: str, *, every: bool) -> LiveTurn:
        """Resume the thread with the answers to `ids` (a turn running in the background, returned). Raises
        AlreadyAnswered, NotPending, Incomplete, TurnBusy, and what `resolve` raises (an answer that does not fit,
        answers.QuestionChanged)."""
        pending = self.pending(thread_id)
        self.refuse_if_answered(thread_id, ids, pending)
        if self.turns.running(thread_id) is not None:
            raise TurnBusy(thread_id)
        if not pending:
            raise NotPending("Nothing is waiting for confirmation on this thread any more (it was answered "
                             "elsewhere, or the turn moved on); reload to see where it stands.")
        unknown = sorted(ids - set(pending))
        if unknown:
            raise NotPending(f"These confirmations are no longer pending: {', '.join(unknown)}; reload.")
        missing = sorted(set(pending) - ids)
        if every and missing:
            raise Incomplete(f"Answer every pending confirmation of the turn together; missing: {', '.join(missing)}.")
        values = resolve(pending)
        refs = self.claim([pending[i] for i in ids], values, via)
        try:
            return self.turns.start(thread_id, resume_command(values),
                                    on_end=lambda: self.withdraw_unapplied(thread_id, refs))
        except BaseException:
            self.release(refs)
            raise

    @contextmanager
    def answering(self, thread_id: str, items: list[dict[str, Any]], values: Mapping[str, Any],
                  via: str) -> Iterator[None]:
        """For a caller that runs the resumed turn itself (`jarvis approve`): the same record, withdrawn when the
        answer was not applied."""
        self.refuse_if_answered(thread_id, {i["interrupt_id"] for i in items}, self.pending(thread_id))
        refs = self.claim(items, values, via)
        try:
            yield
        finally:
            self.withdraw_unapplied(thread_id, refs)

    def refuse_if_answered(self, thread_id: str, ids: set[str], pending: Mapping[str, Mapping[str, Any]]) -> None:
        """AlreadyAnswered (who, where, when) for a question another surface answered: rather than "busy" while
        its turn runs, or "no longer pending" after."""
        for interrupt_id in ids:
            first = self.store.last_answer(thread_id, interrupt_id)
            if first is None:
                continue
            shown = pending.get(interrupt_id)
            if shown is None:
                raise AlreadyAnswered(first)
            ref = self.store.ref(shown)
            answered = self.store.answered(ref)
            if answered is None:
                continue
            if not self._abandoned(thread_id, answered):
                raise AlreadyAnswered(answered)
            self.store.release_answer(ref)  # its process died before the answer reached the call: answer again

    def _abandoned(self, thread_id: str, answered: Answered) -> bool:
        """The answer's turn is over and never applied it: no turn runs on the thread here or in any worker, and
        the answer is older than a claim's lease (its turn would hold the thread by then). Left by a process that
        died between recording an answer and resuming the thread (withdraw_unapplied never ran)."""
        claims = self.turns.claims
        if self.turns.running(thread_id) is not None or (claims is not None and claims.holder(thread_id)):
            return False
        at = answered.at if answered.at.tzinfo else answered.at.replace(tzinfo=timezone.utc)
        lease = claims.lease if claims is not None else timedelta(0)
        return utcnow() - at > lease

    def claim(self, items: list[dict[str, Any]], values: Mapping[str, Any], via: str) -> list[str]:
        """Record `via` as the first to answer each item; AlreadyAnswered (and nothing recorded) when another was."""
        refs: list[str] = []
        try:
            for item in items:
                refs.append(self.store.claim_answer(item, _word(values.get(item["interrupt_id"])), via))
        except AlreadyAnswered:
            self.release(refs)
            raise
        return refs

    def release(self, refs: list[str]) -> None:
        for ref in refs:
            self.store.release_answer(ref)

    def withdraw_unapplied(self, thread_id: str, refs: list[str]) -> None:
        """After the turn: a question still pending as it was did not get its answer; it is open again."""
        still = {self.store.ref(p) for p in self.pending(thread_id).values()}
        self.release([ref for ref in refs if ref in still])
