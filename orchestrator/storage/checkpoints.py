"""Maintenance of the checkpointer's tables: pruning old checkpoints of a thread.

Every checkpoint holds the whole state, so keeping all of them makes a thread's storage grow with the square
of its length. Jarvis needs only the recent ones (to resume, approve, inspect), so after each turn it keeps the
newest `storage.keep_checkpoints` of the thread; `jarvis threads prune` trims finished threads further.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass

from orchestrator.storage import writer
from orchestrator.core.config import Settings
from orchestrator.core.kept_sqlite import KeptConnections
from .checkpoint_window import newest_gone
from .pg import prune_postgres_thread
from .engines import CHECKPOINTS_DB, is_postgres, sqlite_path, tune_sqlite

log = logging.getLogger(__name__)


@dataclass
class PruneReport:
    thread_id: str
    checkpoints_removed: int
    bytes_freed: int


def _connect(settings: Settings) -> sqlite3.Connection:
    conn = sqlite3.connect(str(sqlite_path(settings, CHECKPOINTS_DB)), timeout=30)
    tune_sqlite(conn)
    return conn


# The trim after each turn runs on a kept connection: opening one (with its pragmas) cost more than the trim's
# query when there is nothing to trim.
_pruners = KeptConnections(2, setup=tune_sqlite)


def prune_thread(settings: Settings, thread_id: str, keep: int, *, runs_from: str | None = None) -> PruneReport:
    """Delete all but the newest `keep` checkpoints of the thread (and their pending writes).

    `runs_from`: a step that trims its thread before its own checkpoint is written (the chat graph's `respond`)
    names the checkpoint it runs from. Its own then counts among the kept whether it lands before the trim runs or
    after: a trim that counted what was on disk kept one too many when the checkpoint landed last."""
    if keep < 1:
        raise ValueError("keep at least one checkpoint: the newest is the thread")
    if is_postgres(settings):
        return PruneReport(thread_id, *prune_postgres_thread(settings.storage.url or "", thread_id, keep, runs_from))
    with _pruners.use(str(sqlite_path(settings, CHECKPOINTS_DB))) as (_, conn), conn:
        gone = newest_gone(lambda sql, args: [r[0] for r in conn.execute(sql, args)], "?", thread_id, keep,
                           runs_from)
        if gone is None:  # nothing older: no write, so the next turn's checkpoints never wait for one
            return PruneReport(thread_id, 0, 0)
        size, count = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0), COUNT(*) FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_id <= ?", (thread_id, gone)).fetchone()
        (wsize,) = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id = ? AND checkpoint_id <= ?",
            (thread_id, gone)).fetchone()
        conn.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id <= ?", (thread_id, gone))
        conn.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id <= ?", (thread_id, gone))
    return PruneReport(thread_id, int(count), int(size) + int(wsize))


def vacuum(settings: Settings) -> int:
    """Give freed pages back to the file system. Returns the bytes the file shrank by."""
    if is_postgres(settings):
        return 0
    path = sqlite_path(settings, CHECKPOINTS_DB)
    before = path.stat().st_size
    conn = _connect(settings)
    try:
        conn.execute("VACUUM")
    finally:
        conn.close()
    return max(0, before - path.stat().st_size)


def prune_later(settings: Settings, thread_id: str, at_most: int | None = None, runs_from: str | None = None) -> None:
    """After a run: trim the thread to storage.keep_checkpoints, off the hot path. `at_most`: how many checkpoints
    the caller knows the thread holds at most (a chat turn knows it from its step); no more than kept, nothing is
    read (the query cost a quarter of a millisecond, every turn: bench/turn_overhead.py). `runs_from`: as for
    prune_thread, when the caller is a step whose own checkpoint is still to be written."""
    keep = settings.storage.keep_checkpoints
    if not keep or (at_most is not None and at_most <= keep):
        return

    def job() -> None:
        try:
            prune_thread(settings, thread_id, keep, runs_from=runs_from)
        except Exception as exc:  # noqa: BLE001 - housekeeping never breaks a turn
            log.warning("could not prune checkpoints of %s: %s", thread_id, exc)

    writer.submit(job)
