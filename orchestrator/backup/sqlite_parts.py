"""The SQLite databases of a data folder, copied while Jarvis runs with SQLite's online backup API.

All of them are copied as they were at one instant (`one_instant`), not each at the moment its turn came: Jarvis
writes one thing to several databases in turn (a reminder's message into the thread's checkpoint, then the
reminder marked fired in jarvis.sqlite; a confirmation's interrupt, then the jorb paused), and copies of different
moments could hold the second write without the first: a reminder marked fired whose message is in no thread, a
jorb paused on a confirmation its checkpoint does not hold. A copy of one instant is what a power cut at that
instant would leave, which Jarvis recovers from (the ledger, reminders delivered again under the same id).

A file copy of a live database can catch a page half written or miss what still sits in its WAL; the backup API
copies a consistent snapshot of each database (`sqlite3.Connection.backup`, in one step: see PAGES_PER_STEP).
Databases are found by their header, not by a list of names, so a database a later feature adds to the data
folder is not left out.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

SQLITE_HEADER = b"SQLite format 3\x00"
# Files SQLite keeps beside a database; they belong to the database and are never copied as files.
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")
# The whole database in one step, inside one read transaction: in WAL mode writers go on meanwhile and the copy is
# the snapshot the step began in. Copied in several steps, a write from another connection between two steps
# restarts the copy from the first page (as sqlite3_backup_step documents): a busy Jarvis would delay it.
PAGES_PER_STEP = -1


def is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def is_side_file(path: Path) -> bool:
    """A WAL, shared-memory or rollback-journal file beside a database."""
    return any(path.name.endswith(s) and path.with_name(path.name[: -len(s)]).exists() for s in SIDE_SUFFIXES)


def find_databases(folder: Path) -> list[Path]:
    """Every SQLite database under `folder` (by its header), sorted."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink() and not is_side_file(p)
                  and is_sqlite(p))


IN_MEMORY_MAX = 256 << 20  # a database up to this size is copied into memory, not through a staging file
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
                src.execute("BEGIN")
                src.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts at a read
                sources.append(src)
        finally:
            for lock in locks:
                lock.close()  # closing rolls back: the write locks go
        yield sources


def _live_size(source: Path) -> int:
    wal = source.with_name(source.name + "-wal")
    return source.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def snapshot(source: Path, staging: Path, src: sqlite3.Connection | None = None) -> tuple[list | None, dict]:
    """A consistent copy of the live database `source` through the backup API (from `src`'s read transaction
    when given: `one_instant`), and what it holds (`describe`): as pieces of bytes when it fits in memory (no
    staging file written and read again, the image not copied to change its header), else written to `staging`
    (pieces None)."""
    own = src is None
    src = src if src is not None else _open_source(source)
    try:
        in_memory = _live_size(source) <= IN_MEMORY_MAX
        out = sqlite3.connect(":memory:" if in_memory else str(staging))
        try:
            if not in_memory:
                out.execute("PRAGMA journal_mode=OFF")  # a scratch copy: nothing to roll back, nothing to sync
                out.execute("PRAGMA synchronous=OFF")
            src.backup(out, pages=PAGES_PER_STEP)
            described = _describe(out)
            if not in_memory:
                out.close()
                with open(staging, "r+b") as f:
                    f.seek(_VERSIONS.start)
                    f.write(b"\x01\x01")
                return None, described
            image = memoryview(out.serialize())
            return [image[:_VERSIONS.start], b"\x01\x01", image[_VERSIONS.stop:]], described
        finally:
            out.close()
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
