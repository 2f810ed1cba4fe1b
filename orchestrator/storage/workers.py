"""Worker heartbeats: whether a Jarvis process on another machine that shares the database is still alive.

On one machine a process id answers that (the ledger asks the kernel). Across machines nothing does, so every
process that starts a side effect records itself in `worker_heartbeats` (worker id, host, pid, last seen) and
renews the row every third of `storage.claim_lease_s` while it lives. A row not renewed for a whole lease
means the process is gone: a call it left `started` is then "in doubt" for the user to decide, instead of
"still running elsewhere" for ever.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import datetime, timedelta, timezone

from sqlalchemy import DateTime, Integer, String, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from .claims import worker_id
from orchestrator.core.config import Settings
from .engines import JARVIS_DB, Base, database_url, jarvis_engine, open_engine, utcnow

log = logging.getLogger(__name__)


class HeartbeatRow(Base):
    __tablename__ = "worker_heartbeats"

    worker: Mapped[str] = mapped_column(String(160), primary_key=True)
    host: Mapped[str] = mapped_column(String(256))
    pid: Mapped[int] = mapped_column(Integer)
    seen: Mapped[datetime] = mapped_column(DateTime(timezone=True))


_beating: set[str] = set()  # database urls this process beats in
_lock = threading.Lock()


def _beat(engine, worker: str) -> None:
    with Session(engine) as s, s.begin():
        done = s.execute(update(HeartbeatRow).where(HeartbeatRow.worker == worker).values(seen=utcnow()))
        if done.rowcount:
            return
    try:
        with Session(engine) as s, s.begin():
            s.add(HeartbeatRow(worker=worker, host=socket.gethostname(), pid=os.getpid(), seen=utcnow()))
    except IntegrityError:  # written by our own beat thread in between
        pass


def ensure_heartbeat(settings: Settings, worker: str | None = None) -> None:
    """Record this process as alive now, and keep doing so in the background while it runs (idempotent). The beat
    goes through the engine in use for the database and ends when the database is closed (`engines.dispose_all`:
    beating then reopened a closed database, or one whose folder was gone); opened again, it is started again."""
    worker = worker or worker_id()
    engine = jarvis_engine(settings)  # before the check: while it is in use, a running beat goes on
    key = database_url(settings, JARVIS_DB)  # the engines' own key for it
    with _lock:
        if key in _beating:
            return
        _beat(engine, worker)
        interval = settings.storage.claim_lease_s / 3

        def loop() -> None:  # while the database is open (a daemon thread)
            while True:
                time.sleep(interval)
                with _lock:
                    current = open_engine(key)
                    if current is None:
                        _beating.discard(key)
                        return
                try:
                    _beat(current, worker)
                except Exception as exc:  # noqa: BLE001 - the next beat tries again
                    log.warning("could not record this worker's heartbeat: %s", exc)

        threading.Thread(target=loop, name="worker-heartbeat", daemon=True).start()
        _beating.add(key)


def seems_alive(settings: Settings, worker: str | None) -> bool:
    """False only when the worker's heartbeat is older than a lease; True when it is fresh or cannot be told
    (no worker recorded, or no heartbeat row)."""
    if not worker:
        return True
    with Session(jarvis_engine(settings)) as s:
        seen = s.scalar(select(HeartbeatRow.seen).where(HeartbeatRow.worker == worker))
    if seen is None:
        return True
    if seen.tzinfo is None:
        seen = seen.replace(tzinfo=timezone.utc)
    return utcnow() - seen <= timedelta(seconds=settings.storage.claim_lease_s)
