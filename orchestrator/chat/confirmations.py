"""Finding what waits for the user, across threads and processes, and recovering calls cut off by a crash."""

from __future__ import annotations

import logging
from typing import Any

from orchestrator.app import service_for
from orchestrator.core.config import Settings
from orchestrator.core.ids import jorb_id_of
from orchestrator.tools.ledger import EffectsLedger
from .threads import RUNNING, WAITING, ThreadIndex, pending_confirmations

log = logging.getLogger(__name__)


def graph_for_thread(chat_graph: Any, settings: Settings, thread_id: str) -> Any:
    """Jorb threads (`jorb:<id>`) live in the jorb graph; every other thread in the chat graph."""
    jorb_id = jorb_id_of(thread_id)
    if jorb_id is not None:
        return service_for(settings).graph_for(jorb_id)
    return chat_graph


def list_pending(graph: Any, settings: Settings, thread_id: str | None = None) -> list[dict[str, Any]]:
    """Every confirmation waiting in the checkpoints (of one thread, or of all threads that may be waiting),
    chat threads and jorbs alike."""
    if thread_id:
        return _confirmations(graph_for_thread(graph, settings, thread_id), thread_id)
    items: list[dict[str, Any]] = []
    for info in ThreadIndex(settings).list(limit=10_000, statuses=(WAITING, RUNNING)):
        items.extend(_confirmations(graph_for_thread(graph, settings, info.thread_id), info.thread_id))
    return items


def _confirmations(graph: Any, thread_id: str) -> list[dict[str, Any]]:
    return [p for p in pending_confirmations(graph, thread_id) if p.get("type") == "confirmation"]


def recover_in_doubt(graph: Any, settings: Settings, thread_id: str | None = None) -> int:
    """Re-run the tool tasks of threads whose ledger holds a call started by a process that died.

    The task runs again from its start: its confirmation was already answered (the answer is in the
    checkpoint), so it reaches the ledger, finds the call started and unfinished, and asks the user whether
    it should run again ("may have happened"). Nothing is executed without that answer.
    """
    ledger = EffectsLedger(settings)
    threads = {e.thread_id for e in ledger.in_doubt(thread_id)}
    recovered = 0
    for tid in sorted(threads):
        config = {"configurable": {"thread_id": tid}}
        if jorb_id_of(tid) is not None:
            continue  # jorbs recover through JorbService.recover (their step is retried as a whole)
        snapshot = graph.get_state(config)
        if not snapshot.next:
            continue
        already_asking = any(isinstance(i.value, dict) and i.value.get("kind") == "in_doubt" for i in snapshot.interrupts)
        if already_asking:
            continue
        log.info("thread %s has a call that may have happened; asking the user", tid)
        try:
            graph.invoke(None, config)
        except Exception:  # noqa: BLE001 - recovery must not block listing the rest
            log.exception("could not recover thread %s", tid)
            continue
        recovered += 1
    return recovered
