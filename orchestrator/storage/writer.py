"""A background writer: bookkeeping writes (telemetry, thread status) leave the turn's hot path.

Writes run in order on one daemon thread; `flush()` waits for them and runs at interpreter exit, so a
one-shot CLI process still records its run.

The first write queued on an idle writer waits LINGER_S before it runs, and the writes queued meanwhile run right
after it. A turn queues its writes while it runs (its thread's status at the start and at the end, its run, its
checkpoint trim): written at once, each landed while the turn still ran, and Python runs one thread at a time, so
the turn waited for them (bench/turn_overhead.py: 0.6 ms of a 9 ms turn). Waiting lets a quick turn end first, and
its two status writes become one (threads.py merges a thread's queued touches). `flush()` ends the wait.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
_thread: threading.Thread | None = None
_lock = threading.Lock()
LINGER_S = 0.05
_flushers = 0  # threads in flush(): while any, nothing waits
_hurry = threading.Event()


def _run(job: Callable[[], None] | None) -> None:
    try:
        if job is not None:
            job()
    except Exception:  # noqa: BLE001 - bookkeeping must never break anything
        log.exception("background write failed")
    finally:
        _queue.task_done()


def _work() -> None:
    while True:
        first = _queue.get()
        _hurry.wait(LINGER_S)
        _run(first)
        while True:  # the rest of the batch, without waiting again
            try:
                job = _queue.get_nowait()
            except queue.Empty:
                break
            _run(job)


def submit(job: Callable[[], None]) -> None:
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="jarvis-writer", daemon=True)
            _thread.start()
    _queue.put(job)


def flush() -> None:
    """Wait until every submitted write is done (at once: the writer does not linger while anyone waits)."""
    global _flushers
    if _thread is None or not _thread.is_alive():
        return
    with _lock:
        _flushers += 1
        _hurry.set()
    try:
        _queue.join()
    finally:
        with _lock:
            _flushers -= 1
            if not _flushers:
                _hurry.clear()


atexit.register(flush)
