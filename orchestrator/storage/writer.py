"""A background writer: bookkeeping writes (telemetry, thread status) leave the turn's hot path.

Writes run in order on one daemon thread; `flush()` waits for them and runs at interpreter exit, so a
one-shot CLI process still records its run.
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


def _work() -> None:
    while True:
        job = _queue.get()
        try:
            if job is not None:
                job()
        except Exception:  # noqa: BLE001 - bookkeeping must never break anything
            log.exception("background write failed")
        finally:
            _queue.task_done()


def submit(job: Callable[[], None]) -> None:
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="jarvis-writer", daemon=True)
            _thread.start()
    _queue.put(job)


def flush() -> None:
    """Wait until every submitted write is done."""
    if _thread is not None and _thread.is_alive():
        _queue.join()


atexit.register(flush)
