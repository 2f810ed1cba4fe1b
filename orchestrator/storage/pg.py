"""PostgreSQL, for `storage.url: postgresql://...`: several `jarvis run` workers, on several machines, sharing
threads, jorbs, reminders and the tool registry in one database.

SQLAlchemy reaches it through psycopg 3; the checkpointer is LangGraph's PostgresSaver over a psycopg pool.
Setting up tables is serialized with an advisory lock, so workers starting together do not race on CREATE TABLE.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from .checkpoint_window import newest_gone

# pg_advisory_lock keys (any bigint; these spell "jarvis" and a purpose, so they stay out of other apps' way).
SCHEMA_LOCK = 0x6A61727669730001
CHECKPOINT_SETUP_LOCK = 0x6A61727669730002


class StorageUnavailable(RuntimeError):
    """The configured database cannot be reached; the message names it and says what to check."""


def unavailable(url: str, reason: object) -> StorageUnavailable:
    first_line = str(reason).strip().splitlines()[0] if str(reason).strip() else type(reason).__name__
    return StorageUnavailable(
        f"cannot use PostgreSQL at {describe(url)} (storage.url): {first_line}. Check that the server runs, the user "
        "and password, and that the database exists (createdb <name>); or remove storage.url to use SQLite files.")


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and url.split(":", 1)[0].split("+", 1)[0] in ("postgresql", "postgres")


def sqlalchemy_url(url: str) -> str:
    """`postgresql://` and `postgres://` mean psycopg 3 (SQLAlchemy's default would be psycopg2)."""
    scheme, rest = url.split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme in ("postgresql", "postgres") else url


def libpq_url(url: str) -> str:
    """The same URL as libpq reads it (no SQLAlchemy driver suffix)."""
    scheme, rest = url.split("://", 1)
    return f"postgresql://{rest}" if scheme.startswith("postgres") else url


def describe(url: str) -> str:
    """host:port/database of the URL, without its password (for messages and logs)."""
    parts = urlsplit(libpq_url(url))
    host = parts.hostname or "local socket"
    return f"{host}:{parts.port or 5432}{parts.path or ''}"


_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def _pool(url: str, timeout: float = 15.0):
    """One psycopg connection pool per URL and process, opened and checked once."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool, PoolTimeout

    conninfo = libpq_url(url)
    with _pools_lock:
        pool = _pools.get(conninfo)
        if pool is None:
            # autocommit and dict rows are what PostgresSaver expects; prepare_threshold=0 keeps statements
            # valid behind a transaction-pooling proxy (pgbouncer) too.
            pool = ConnectionPool(conninfo, min_size=1, max_size=8, open=False,
                                  kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
            pool.open(wait=False)
            try:
                pool.wait(timeout=timeout)
            except PoolTimeout:
                pool.close()
                raise unavailable(url, f"no connection within {timeout:.0f} s") from None
            _pools[conninfo] = pool
        return pool


def close_pools() -> None:
    with _pools_lock:
        for pool in _pools.values():
            pool.close()
        _pools.clear()


def make_postgres_checkpointer(url: str, serde: Any):
    from langgraph.checkpoint.postgres import PostgresSaver

    pool = _pool(url)
    saver = PostgresSaver(pool, serde=serde)
    with pool.connection() as conn:  # one worker at a time runs the saver's migrations
        conn.execute("SELECT pg_advisory_lock(%s)", (CHECKPOINT_SETUP_LOCK,))
        try:
            saver.setup()
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (CHECKPOINT_SETUP_LOCK,))
    return saver


async def make_async_postgres_checkpointer(url: str, serde: Any):
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    make_postgres_checkpointer(url, serde)  # the tables, set up once under the lock
    conn = await AsyncConnection.connect(libpq_url(url), autocommit=True, prepare_threshold=0, row_factory=dict_row)
    return AsyncPostgresSaver(conn, serde=serde)


def prune_postgres_thread(url: str, thread_id: str, keep: int, runs_from: str | None = None) -> tuple[int, int]:
    """All but the newest `keep` checkpoints of the thread go, with their writes and the channel blobs no kept
    checkpoint refers to (PostgresSaver stores each channel value once per version, in checkpoint_blobs).
    `runs_from`: as in storage/checkpoints.prune_thread. Returns (checkpoints removed, bytes freed)."""
    with _pool(url).connection() as conn, conn.transaction():
        gone_upto = newest_gone(lambda sql, args: [r["checkpoint_id"] for r in conn.execute(sql, args)], "%s",
                                thread_id, keep, runs_from)
        if gone_upto is None:
            return 0, 0
        gone = conn.execute(
            "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_id <= %s "
            "RETURNING pg_column_size(checkpoint) + pg_column_size(metadata) AS size", (thread_id, gone_upto)).fetchall()
        writes = conn.execute(
            "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id <= %s "
            "RETURNING pg_column_size(blob) AS size", (thread_id, gone_upto)).fetchall()
        blobs = conn.execute(
            "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS ("
            "  SELECT 1 FROM checkpoints c, jsonb_each_text(c.checkpoint -> 'channel_versions') v"
            "  WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns"
            "    AND v.key = b.channel AND v.value = b.version) "
            "RETURNING COALESCE(pg_column_size(blob), 0) AS size", (thread_id,)).fetchall()
        freed = sum(int(r["size"] or 0) for r in [*gone, *writes, *blobs])
        return len(gone), freed

