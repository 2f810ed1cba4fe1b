"""The SQLite databases of a data folder, copied while Jarvis runs with SQLite's online backup API.

All of them are copied as they were at one instant (`one_instant`), not each at the moment its turn came: Jarvis
writes one thing to several databases in turn (a reminder's message into the thread's checkpoint, then the
reminder marked fired in jarvis.sqlite; a confirmation's interrupt, then the jorb paused), and copies of different
moments could hold the second write without the first: a reminder marked fired whose message is in no thread, a
jorb paused on a confirmation its checkpoint does not hold. A copy of one instant is what a power cut at that
instant would leave, which Jarvis recovers from (the ledger, reminders delivered again under the same id).

A file copy of a live database can catch a page half written or miss what still sits in its WAL; the backup API
copies a consistent snapshot of each database (`sqlite3.Connection.backup`, in steps inside one read transaction:
see PAGES_PER_STEP) into a staging file, which the archive then reads once (hashed as it is written). Databases
are found by asking SQLite of each file (`is_sqlite`), not by a list of names, so a database a later feature adds
to the data folder is not left out.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
# Files SQLite keeps beside a database; they belong to the database and are never copied as files.
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")
# Pages copied per backup step (4 MiB at the usual 4 KiB page). Every step reads from the same read transaction,
# begun before the first (`one_instant`, or `snapshot` when given none): the copy is that transaction's snapshot
# while writers go on, and a write between two steps does not restart it (sqlite3_backup_step restarts only a copy
# whose source opens a new read transaction at each step). Between steps a backup no one waits for pauses
# (`snapshot`'s `between_steps`), so it never holds a core for long while Jarvis answers.
PAGES_PER_STEP = 1024


def is_sqlite(path: Path) -> bool:
    """Whether `path` is an SQLite database with at least a page, asked of SQLite rather than read with open().
    Closing any descriptor of a file drops every POSIX lock this process holds on it: in a process that has the
    database open (`jarvis run` making a scheduled backup), a header read with open() and closed would take away
    its connections' locks, and another process's connection, finding none, would take the database for unused
    and delete its WAL and shared memory under them (their commits then lost, or a bus error). SQLite keeps such a
    descriptor open until none of this process's locks on the file is left."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
    except sqlite3.Error:
        return False
    try:
        return conn.execute("PRAGMA page_count").fetchone()[0] > 0
    except sqlite3.DatabaseError as exc:
        # Any error but "not a database" (a database locked, busy, unreadable) says it is one: copied through the
        # backup API, which then says what is wrong, rather than left out unsaid. A file that begins as a database
        # but that SQLite cannot read (damaged) is one too, for the same reason; its header is read with open()
        # only then: no connection of this process can be holding locks on a file SQLite will not open.
        if exc.sqlite_errorcode != sqlite3.SQLITE_NOTADB:
            return exc.sqlite_errorcode != sqlite3.SQLITE_CANTOPEN
    finally:
        conn.close()
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def is_side_file(path: Path) -> bool:
    """A WAL, shared-memory or rollback-journal file beside a database."""
    return any(path.name.endswith(s) and path.with_name(path.name[: -len(s)]).exists() for s in SIDE_SUFFIXES)


def find_databases(folder: Path) -> list[Path]:
    """Every SQLite database under `folder` (`is_sqlite`), sorted."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and not is_side_file(p)
                  and is_sqlite(p))


# Bytes 18 and 19 of a database file: the write and read versions, 2 in WAL mode, 1 (legacy) otherwise. The copy
# is one file that needs no WAL beside it: it says so, whatever mode the live database is in.
_VERSIONS = slice(18, 20)


LOCK_WAIT_S = 30


def _open_source(source: Path) -> sqlite3.Connection:
    # Read only: the backup never writes the user's data. Autocommit: its read transaction is begun by hand.
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=LOCK_WAIT_S,
                          isolation_level=None)
    src.execute(f"PRAGMA busy_timeout={LOCK_WAIT_S * 1000}")
    return src


@contextmanager
def one_instant(databases: list[Path]) -> Iterator[list[sqlite3.Connection]]:
    """A read connection per database, each in a read transaction begun while every database's write lock was
    held (each taken in turn, in the order given, and let go together): no write lands between two of the
    snapshots, so all of them are of one instant. Writers wait only while the read transactions begin (a WAL
    read mark each); the copies are then made from the snapshots while writers go on."""
    with ExitStack() as stack:
        sources = []
        locks = []
        try:
            for db in databases:
                # A read-only connection's BEGIN IMMEDIATE takes no write lock: this one may write, and never does
                # (each transaction is rolled back).
                lock = sqlite3.connect(str(db), timeout=LOCK_WAIT_S, isolation_level=None)
                locks.append(lock)
                lock.execute("BEGIN IMMEDIATE")
            for db in databases:
                src = _open_source(db)
                stack.callback(src.close)
                _begin_read(src)
                sources.append(src)
        finally:
            for lock in locks:
                lock.close()  # closing rolls back: the write locks go
        yield sources


def _begin_read(src: sqlite3.Connection) -> None:
    src.execute("BEGIN")
    src.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts at a read


def snapshot(source: Path, staging: Path, src: sqlite3.Connection | None = None, *,
             between_steps: Callable[[], None] | None = None) -> dict:
    """A consistent copy of the live database `source` written to `staging` through the backup API, from `src`'s
    read transaction when given (`one_instant`), else from one begun here; returns what it holds (`describe`).
    `between_steps`: called after each step of PAGES_PER_STEP pages (a backup no one waits for pauses there).

    Into a file, not into memory: an in-memory copy is then serialized, a second copy of every page into a
    fresh allocation as large as the database (and a third into Python's bytes), each page faulted in anew;
    the staging file is written once and read once, in 1 MiB pieces, by the archive."""
    own = src is None
    if own:
        src = _open_source(source)
        _begin_read(src)
    try:
        staging.unlink(missing_ok=True)
        out = sqlite3.connect(str(staging))
        try:
            out.execute("PRAGMA journal_mode=OFF")  # a scratch copy: nothing to roll back, nothing to sync
            out.execute("PRAGMA synchronous=OFF")
            src.backup(out, pages=PAGES_PER_STEP, progress=(lambda *_: between_steps()) if between_steps else None)
            described = _describe(out)
        finally:
            out.close()
        with open(staging, "r+b") as f:
            f.seek(_VERSIONS.start)
            f.write(b"\x01\x01")
        return described
    finally:
        if own:
            src.close()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def describe(path: Path) -> dict:
    """Row counts per table and the schema versions (`schema_versions`, jarb_core/sql_schema.py) of a database
    file that nothing else has open (a snapshot)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return _describe(conn)
    finally:
        conn.close()


def _describe(conn: sqlite3.Connection) -> dict:
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    # Full-text indexes (FTS5 and their shadow tables) are rebuilt from their content tables: not counted.
    virtual = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                          "AND sql LIKE 'CREATE VIRTUAL TABLE%'")}
    shadows = {t for t in tables for v in virtual if t.startswith(v + "_") and t != v}
    counts = {t: conn.execute(f"SELECT count(*) FROM {_quoted(t)}").fetchone()[0]
              for t in tables if t not in shadows and t not in virtual}
    versions: dict[str, int] = {}
    if "schema_versions" in tables:
        versions = {r[0]: int(r[1]) for r in conn.execute("SELECT table_name, version FROM schema_versions")}
    return {"tables": counts, "schema_versions": versions}


def integrity_problems(path: Path) -> list[str]:
    """What `PRAGMA integrity_check` finds wrong with a database file ([] when it is whole)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    finally:
        conn.close()
    return [] if rows == ["ok"] else rows
