"""Plain sqlite3 connections kept open for the small reads made on every planner step.

Through SQLAlchemy a one-row read checks a connection out of the pool, runs the statement through the result
machinery and returns the connection: a few tenths of a millisecond in a turn, where LangGraph's own threads are
busy too. On a kept sqlite3 connection it is one statement. These connections only read: each read is its own
implicit transaction, so they never hold a lock, and `PRAGMA data_version` on one of them changes whenever another
connection, of any process, committed to the file.

One connection per database file, the last few used kept open (an open connection holds three descriptors: the
file, its -wal and its -shm).
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
from collections import OrderedDict
from typing import Any

_KEPT = 4
_watches: OrderedDict[str, tuple[int, sqlite3.Connection, threading.Lock]] = OrderedDict()
_serial = itertools.count(1)
_lock = threading.Lock()


def _watch(database: str) -> tuple[int, sqlite3.Connection, threading.Lock]:
    with _lock:
        entry = _watches.get(database)
        if entry is None:
            entry = _watches[database] = (next(_serial), sqlite3.connect(database, check_same_thread=False),
                                          threading.Lock())
            while len(_watches) > _KEPT:
                _watches.popitem(last=False)[1][1].close()
        else:
            _watches.move_to_end(database)
        return entry


def watched_file(engine: Any) -> str | None:
    """The SQLite file behind a SQLAlchemy engine, or None (PostgreSQL, an in-memory or URI database)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def data_version(database: str) -> tuple[int, int]:
    """(which watch connection, its PRAGMA data_version): changes whenever another connection, of any process,
    committed to the file. A watch connection opened anew has another serial, so its first answer always differs."""
    serial, conn, lock = _watch(database)
    with lock:
        return serial, conn.execute("PRAGMA data_version").fetchone()[0]


def first_row(database: str, sql: str, params: tuple = ()) -> tuple | None:
    """The first row of a read on the file's kept connection."""
    _, conn, lock = _watch(database)
    with lock:
        return conn.execute(sql, params).fetchone()
