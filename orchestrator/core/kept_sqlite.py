"""Plain sqlite3 connections kept open for the small statements made on every turn.

Through SQLAlchemy a one-row read checks a connection out of the pool, runs the statement through the result
machinery and returns the connection; a new sqlite3 connection runs its pragmas first. Either costs more than the
statement. Two kinds are kept here:

- watch connections (`data_version`, `first_row`) only read. Each read is its own implicit transaction, so they
  never hold a lock, and `PRAGMA data_version` on one of them changes whenever another connection, of any process,
  committed to the file (a connection's own commits do not change it, which is why they never write).
- `KeptConnections` for a caller's own use (the checkpoint trim after each turn writes on its own).

A kept connection is reopened when its file was replaced (deleted and made again at the same path: a restored
backup, a new data folder), and only the last few used are kept (each holds three descriptors: the file, its -wal
and its -shm).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_serial = itertools.count(1)


def _identity(database: str) -> tuple[int, int] | None:
    try:
        st = os.stat(database)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class KeptConnections:
    """One sqlite3 connection per file, the last `keep` used; `use` hands it out under its own lock."""

    def __init__(self, keep: int, setup: Callable[[sqlite3.Connection], Any] | None = None):
        self.keep = keep
        self.setup = setup
        self._kept: OrderedDict[str, tuple[int, sqlite3.Connection, threading.Lock, tuple[int, int] | None]] = \
            OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def use(self, database: str) -> Iterator[tuple[int, sqlite3.Connection]]:
        """(a serial that changes whenever the connection is opened anew, the connection)."""
        identity = _identity(database)
        with self._lock:
            entry = self._kept.get(database)
            if entry is not None and entry[3] != identity:
                self._kept.pop(database)[1].close()
                entry = None
            if entry is None:
                conn = sqlite3.connect(database, check_same_thread=False, timeout=30)
                if self.setup is not None:
                    self.setup(conn)
                entry = self._kept[database] = (next(_serial), conn, threading.Lock(), _identity(database))
                while len(self._kept) > self.keep:
                    self._kept.popitem(last=False)[1][1].close()
            else:
                self._kept.move_to_end(database)
        serial, conn, lock, _ = entry
        with lock:
            yield serial, conn


_watches = KeptConnections(4)


def watched_file(engine: Any) -> str | None:
    """The SQLite file behind a SQLAlchemy engine, or None (PostgreSQL, an in-memory or URI database)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def data_version(database: str) -> tuple[int, int]:
    """(which watch connection, its PRAGMA data_version): changes whenever another connection, of any process,
    committed to the file. A watch connection opened anew has another serial, so its first answer always differs."""
    with _watches.use(database) as (serial, conn):
        return serial, conn.execute("PRAGMA data_version").fetchone()[0]


def first_row(database: str, sql: str, params: tuple = ()) -> tuple | None:
    """The first row of a read on the file's watch connection."""
    with _watches.use(database) as (_, conn):
        return conn.execute(sql, params).fetchone()
