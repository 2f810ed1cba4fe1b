"""A background writer: bookkeeping writes (telemetry, thread status) leave the turn's hot path.

Writes run in order on one daemon thread; `flush()` waits for them and runs at interpreter exit, so a
one-shot CLI process still records its run.

The first write queued on an idle writer waits LINGER_S before it runs, and the writes queued meanwhile run right
after it. A turn queues its writes while it runs (its thread's status at the start and at the end, its run, its
checkpoint trim): written at once, each landed while the turn still ran, and Python runs one thread at a time, so
the turn waited for them (bench/turn_overhead.py: 0.6 ms of a 9 ms turn). Waiting lets a quick turn end first, and
its two status writes become one (threads.py merges a thread's queued touches). `flush()` ends the wait.

Writes given with their database (`submit_in`) share one transaction with the other writes of their batch for the
same database: a turn's status and its run are one commit, not two.

`flush()` runs what is queued on its caller's thread (after the batch the writer may be running): it waits for the
writes anyway, and waking the writer for them and being woken again cost more than the writes (bench/turn_overhead.py
flushes after every turn). On a thread running an event loop it leaves them to the writer and waits, as before: a
write may touch the disk, which an event loop must not do itself.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _InEngine:
    engine: Any  # a SQLAlchemy Engine, or a function that returns it (called where the batch runs)
    write: Callable[[Any], None]  # given the transaction's Connection


_Item = Callable[[], None] | _InEngine
_pending: list[_Item] = []  # submitted, not yet taken by a batch
_cond = threading.Condition()  # guards _pending and _busy; notified when something is queued or a batch ends
_busy = 0  # batches taken from _pending and still running (a write that flushes runs one inside another)
# held while a batch is taken and run: batches run one at a time, in the order queued (reentrant: a write that
# flushes runs what was queued after it, instead of waiting for itself)
_running = threading.RLock()
_thread: threading.Thread | None = None
_lock = threading.Lock()
LINGER_S = 0.05
_flushers = 0  # threads waiting in flush(): while any, nothing waits
_hurry = threading.Event()


def _run(job: Callable[[], None] | None) -> None:
    try:
        if job is not None:
            job()
    except Exception:  # noqa: BLE001 - bookkeeping must never break anything
        log.exception("background write failed")


def _run_together(engine: Any, writes: list[Callable[[Any], None]]) -> None:
    try:
        with engine.begin() as conn:
            for write in writes:
                write(conn)
        return
    except Exception:  # noqa: BLE001 - one bad write must not lose the others: each again, in its own transaction
        if len(writes) == 1:
            log.exception("background write failed")
            return
    for write in writes:
        _run(lambda write=write: _run_together(engine, [write]))


def _engine_of(item: _InEngine) -> Any:
    try:
        return item.engine() if callable(item.engine) else item.engine
    except Exception:  # noqa: BLE001 - bookkeeping must never break anything
        log.exception("background write failed")
        return None


def _run_batch(batch: list[Callable[[], None] | _InEngine | None]) -> None:
    """In order, except that an engine's writes all run at the place of its first one, in one transaction."""
    engines = {i: _engine_of(item) for i, item in enumerate(batch) if isinstance(item, _InEngine)}
    together: dict[int, list[Callable[[Any], None]]] = {}
    for i, engine in engines.items():
        if engine is not None:
            together.setdefault(id(engine), []).append(batch[i].write)  # type: ignore[union-attr]
    for i, item in enumerate(batch):
        if not isinstance(item, _InEngine):
            _run(item)
        elif engines[i] is not None and id(engines[i]) in together:
            _run_together(engines[i], together.pop(id(engines[i])))


def _run_pending() -> None:
    """Take what is queued and run it, after any batch already running."""
    global _busy
    with _running:
        with _cond:
            batch = _pending[:]
            _pending.clear()
            if not batch:
                return
            _busy += 1
        try:
            _run_batch(batch)
        finally:
            with _cond:
                _busy -= 1
                _cond.notify_all()


def _work() -> None:
    while True:
        with _cond:
            while not _pending:
                _cond.wait()
        _hurry.wait(LINGER_S)  # what is queued meanwhile runs with it
        _run_pending()


def submit(job: Callable[[], None]) -> None:
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="jarvis-writer", daemon=True)
            _thread.start()
    with _cond:
        _pending.append(job)
        _cond.notify_all()


def submit_in(engine: Any, write: Callable[[Any], None]) -> None:
    """A write made in a transaction of `engine`, given its Connection. `engine` may be a function that returns it,
    called where the batch runs, never on an event loop (finding an engine can touch the disk, which an event loop
    must not). The transaction is shared with the batch's other writes for the same engine, in the order given: all
    run where the first of them was queued, so before plain jobs queued between them (only ever writes to other
    databases). If it fails, each write is made again in a transaction of its own."""
    submit(_InEngine(engine, write))  # type: ignore[arg-type]


def flush() -> None:
    """Wait until every write submitted before the call is done: run them here, or, on an event loop's thread,
    have the writer run them at once and wait for it."""
    global _flushers
    if _on_event_loop():
        with _lock:
            _flushers += 1
            _hurry.set()
        try:
            with _cond:
                while _pending or _busy:
                    _cond.wait()
        finally:
            with _lock:
                _flushers -= 1
                if not _flushers:
                    _hurry.clear()
        return
    _run_pending()
    with _lock:
        if not _flushers:  # the writer may be lingering over what ran here: nothing is left to wait for
            _hurry.set()
            _hurry.clear()


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


atexit.register(flush)
