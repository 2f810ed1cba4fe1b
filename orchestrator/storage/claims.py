"""Claims: a thread (a jorb, a chat turn) runs in one worker at a time, across processes and machines.

A claim is a row (key, worker, lease end) taken with one conditional statement (an INSERT, or an UPDATE that
only matches a free, expired or already-own claim), so two workers racing for a key cannot both win, on SQLite
or PostgreSQL alike. A worker renews its claims while it runs; one that dies frees them when the lease ends, or
at once when it was a process of this machine (a restart). Keys are thread ids (`jorb:<id>` for jorbs).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sqlalchemy import DateTime, String
from sqlalchemy.orm import Mapped, mapped_column

from orchestrator.core.config import Settings
from .engines import Base, jarvis_engine, utcnow

log = logging.getLogger(__name__)


class ClaimRow(Base):
    __tablename__ = "work_claims"

    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    worker: Mapped[str] = mapped_column(String(160))
    until: Mapped[datetime] = mapped_column(DateTime(timezone=True))


_worker: tuple[int, str] | None = None


def worker_id() -> str:
    """This process, as other workers see it in the claims table. Made per process id: a child forked from a process
    that had made its own is a worker of its own (with the parent's, the parent's live pid kept the claims of a child
    killed mid-step held, and nothing recovered them)."""
    global _worker
    if _worker is None or _worker[0] != os.getpid():
        _worker = (os.getpid(), f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}")
    return _worker[1]


def _dead_here(worker: str) -> bool:
    """The worker was a process of this machine that no longer exists."""
    host, _, rest = worker.partition(":")
    pid = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class ClaimBusy(Exception):
    """Another worker holds a live claim on the key (holder None: it was let go just now)."""

    def __init__(self, key: str, holder: str | None):
        super().__init__(f"{key} is busy in {holder or 'another worker'}")
        self.key = key
        self.holder = holder


class Claims:
    def __init__(self, settings: Settings, worker: str | None = None):
        self.engine = jarvis_engine(settings)
        self.lease = timedelta(seconds=settings.storage.claim_lease_s)
        self.worker = worker or worker_id()

    def acquire(self, key: str) -> bool:
        """Take the key for this worker; False if another worker holds a live claim on it."""
        now = utcnow()
        try:
            with Session(self.engine) as s, s.begin():
                s.add(ClaimRow(key=key, worker=self.worker, until=now + self.lease))
            return True
        except IntegrityError:
            pass  # claimed before (by anyone): take it over only if it is free, expired or ours
        with Session(self.engine) as s, s.begin():
            taken = s.execute(update(ClaimRow)
                              .where(ClaimRow.key == key,
                                     (ClaimRow.worker == self.worker) | (ClaimRow.until < now))
                              .values(worker=self.worker, until=now + self.lease))
            if taken.rowcount == 1:
                return True
            holder = s.scalar(select(ClaimRow.worker).where(ClaimRow.key == key))
            if holder is None or not _dead_here(holder):
                return False
            # A process of this machine that has died (a restart): no need to wait for its lease to end.
            taken = s.execute(update(ClaimRow)
                              .where(ClaimRow.key == key, ClaimRow.worker == holder)
                              .values(worker=self.worker, until=now + self.lease))
            return taken.rowcount == 1

    def release(self, key: str) -> None:
        with Session(self.engine) as s, s.begin():
            s.execute(delete(ClaimRow).where(ClaimRow.key == key, ClaimRow.worker == self.worker))

    def renew(self, key: str) -> bool:
        with Session(self.engine) as s, s.begin():
            done = s.execute(update(ClaimRow)
                             .where(ClaimRow.key == key, ClaimRow.worker == self.worker)
                             .values(until=utcnow() + self.lease))
            return done.rowcount == 1

    def holder(self, key: str) -> str | None:
        """The worker holding a live claim on the key, if any."""
        with Session(self.engine) as s:
            row = s.scalar(select(ClaimRow).where(ClaimRow.key == key))
            if row is None:
                return None
            until = row.until if row.until.tzinfo else row.until.replace(tzinfo=timezone.utc)
            return row.worker if until >= utcnow() else None

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        """Hold the key for the block, renewed while it runs; ClaimBusy when another worker has it."""
        if not self.acquire(key):
            raise ClaimBusy(key, self.holder(key))
        renewing = self.keep_alive(key)
        try:
            yield
        finally:
            self.let_go(key, renewing)

    def let_go(self, key: str, renewing: threading.Event) -> None:
        """Stop renewing a claim and release it. A release that fails (the database is gone, the disk is full)
        is logged, not raised over what the holder was doing: the lease ends on its own."""
        renewing.set()
        try:
            self.release(key)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not release the claim on %s: %s", key, exc)

    def keep_alive(self, key: str) -> threading.Event:
        """Renew the claim every third of the lease until the returned event is set."""
        stop = threading.Event()
        interval = self.lease.total_seconds() / 3

        def beat() -> None:
            while not stop.wait(interval):
                try:
                    if not self.renew(key):
                        log.warning("lost the claim on %s (its lease ran out); another worker may take it", key)
                        return
                except Exception as exc:  # noqa: BLE001 - the next beat tries again
                    log.warning("could not renew the claim on %s: %s", key, exc)

        threading.Thread(target=beat, name=f"claim-{key}", daemon=True).start()
        return stop
