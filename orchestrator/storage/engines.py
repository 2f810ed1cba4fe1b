"""The one place that opens databases: SQLAlchemy engines and the LangGraph checkpointer.

SQLite files under `storage.data_dir` by default (one file per concern: checkpoints, jarvis, tool_registry,
docs_index); every table and the checkpointer move to one PostgreSQL database when `storage.url` is set.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, MetaData, String, create_engine, event, text
from sqlalchemy.types import TypeDecorator
from sqlalchemy.orm import DeclarativeBase

from jarb_core.sql_schema import upgrade

from orchestrator.core.config import Settings
from orchestrator.core.disk_full import watch as watch_for_full_disk
from . import writer
from .pg import (
    SCHEMA_LOCK, close_pools, is_postgres_url, make_async_postgres_checkpointer, make_postgres_checkpointer,
    sqlalchemy_url, unavailable,
)

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    """Now, timezone-aware in UTC: the one clock of every stored timestamp."""
    return datetime.now(timezone.utc)


CHECKPOINTS_DB = "checkpoints"
JARVIS_DB = "jarvis"
TOOL_REGISTRY_DB = "tool_registry"
DOCS_INDEX_DB = "docs_index"


class StatusText(TypeDecorator):
    """A status column: stored as its plain text (the column stays VARCHAR), written and compared only as a member of
    its enum. Any other value is refused before it reaches the database (ValueError inside SQLAlchemy's
    StatementError), and a plain string is what every driver gets (psycopg would write an Enum by its *name*)."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[StrEnum], length: int = 16):
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        return None if value is None else self.enum(value).value

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        try:
            return None if value is None else self.enum(value)
        except ValueError:  # written by a newer Jarvis: shown as it is rather than failing the read
            return value


class Base(DeclarativeBase):
    """Tables of the jarvis database (runs, effects ledger, jorbs, inbox, reminders...)."""


_engines: dict[str, Engine] = {}
_schemas_ready: set[tuple[str, int]] = set()
_lock = threading.Lock()


def bump_generation(session: Any, meta: type) -> None:
    """One more generation in an index's key/value `meta` table (the document index, memory): other processes'
    caches of it (vectors, answers) see that it changed."""
    row = session.get(meta, "generation")
    if row is None:
        session.add(meta(key="generation", value="1"))
    else:
        row.value = str(int(row.value) + 1)


def _sqlite_file(settings: Settings, name: str) -> Path:
    return settings.data_dir / f"{name}.sqlite"


def sqlite_path(settings: Settings, name: str) -> Path:
    """The database's SQLite file, its folder made (for a caller that opens it itself)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return _sqlite_file(settings, name)


def database_url(settings: Settings, name: str) -> str:
    """The database's URL; a SQLite file's folder is made when its engine is (looked up at every turn: no mkdir)."""
    if settings.storage.url:
        return settings.storage.url
    return f"sqlite:///{_sqlite_file(settings, name)}"


def is_postgres(settings: Settings) -> bool:
    return is_postgres_url(settings.storage.url)


# Every SQLite connection Jarvis opens (engines, checkpointers, pruning) gets these, in one place. WAL with
# synchronous=NORMAL: a killed process loses nothing, only a power cut can drop the last commits; a writer waits up
# to 30 s for another's lock instead of failing at once.
SQLITE_PRAGMAS = ("journal_mode=WAL", "busy_timeout=30000", "synchronous=NORMAL", "foreign_keys=ON")


def tune_sqlite(dbapi_conn: Any, _record: Any = None) -> None:
    """Apply SQLITE_PRAGMAS to a sqlite3 connection (also SQLAlchemy's connect hook)."""
    cur = dbapi_conn.cursor()
    for pragma in SQLITE_PRAGMAS:
        cur.execute(f"PRAGMA {pragma}")
    cur.close()


def engine_for_url(url: str) -> Engine:
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            if url.startswith("sqlite"):
                engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
                event.listen(engine, "connect", tune_sqlite)
                if engine.url.database and engine.url.database != ":memory:":
                    Path(engine.url.database).parent.mkdir(parents=True, exist_ok=True)
                    watch_for_full_disk(Path(engine.url.database).parent)
            else:
                engine = create_engine(sqlalchemy_url(url), pool_pre_ping=True)
            _engines[url] = engine
        return engine


def open_engine(url: str) -> Engine | None:
    """The engine in use for `url`, or None when none is (never opened, or closed by `dispose_all`)."""
    with _lock:
        return _engines.get(url)


def engine_for(settings: Settings, name: str = JARVIS_DB) -> Engine:
    return engine_for_url(database_url(settings, name))


def ensure_schema(engine: Engine, metadata: MetaData = Base.metadata) -> None:
    """Create missing tables and migrate older ones (jarb_core/sql_schema.py: a version per table); again
    whenever a module imported later has added tables to the metadata."""
    key = (engine, id(metadata), len(metadata.tables))  # the engine itself: rendering its URL cost more than the rest
    if key in _schemas_ready:
        return
    with _lock:
        if key not in _schemas_ready:
            with schema_transaction(engine) as conn:
                changed = upgrade(conn, metadata)
            if changed:
                log.info("database %s migrated: added %s", engine.url.render_as_string(hide_password=True),
                         ", ".join(changed))
            _schemas_ready.add(key)


@contextmanager
def schema_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that holds the database's schema lock from its start: workers starting together would race
    on CREATE TABLE and on each migration step. PostgreSQL: an advisory lock that ends with the transaction;
    SQLite: BEGIN IMMEDIATE (the write lock; the other process waits for it, busy_timeout)."""
    if engine.dialect.name == "postgresql":
        from sqlalchemy.exc import OperationalError

        try:
            with engine.begin() as conn:
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
                yield conn
        except OperationalError as exc:
            raise unavailable(str(engine.url), exc.orig or exc) from None
        return
    with engine.connect() as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()


def jarvis_engine(settings: Settings) -> Engine:
    engine = engine_for(settings, JARVIS_DB)
    ensure_schema(engine)
    return engine


def dispose_all() -> None:
    """Close every engine, once the bookkeeping still queued for them is written (the writer waits a moment before
    it writes: storage/writer.py)."""
    writer.flush()
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _schemas_ready.clear()
    close_pools()


# Modules whose pydantic models (and the enums they hold) live in checkpoints; only their classes (and LangGraph's
# own safe types) may be rebuilt from a checkpoint, so a tampered database cannot instantiate arbitrary classes.
CHECKPOINT_STATE_MODULES = ["orchestrator.chat.state", "orchestrator.jorbs.schema", "orchestrator.jorbs.mission"]
# Checkpoints written before the package layout name the chat state's module by its old, flat name. It is the same
# module, so it is known under both names and a thread paused before an upgrade still resumes.
LEGACY_STATE_MODULES = {"orchestrator.state": "orchestrator.chat.state"}


def checkpoint_serde():
    import importlib
    import inspect
    from enum import Enum

    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from pydantic import BaseModel

    allowed: list[tuple[str, str]] = []
    for module_name in CHECKPOINT_STATE_MODULES:
        module = importlib.import_module(module_name)
        old_names = [old for old, new in LEGACY_STATE_MODULES.items() if new == module_name]
        for old in old_names:
            sys.modules.setdefault(old, module)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, (BaseModel, Enum)) and obj.__module__ == module_name:
                allowed += [(spelled, name) for spelled in (module_name, *old_names)]
    return JsonPlusSerializer(allowed_msgpack_modules=allowed)


def make_checkpointer(settings: Settings):
    """A synchronous checkpointer (SqliteSaver, or PostgresSaver when storage.url is PostgreSQL)."""
    if is_postgres(settings):
        return make_postgres_checkpointer(settings.storage.url, checkpoint_serde())
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = sqlite_path(settings, CHECKPOINTS_DB)
    watch_for_full_disk(path.parent)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    tune_sqlite(conn)
    saver = SqliteSaver(conn, serde=checkpoint_serde())
    saver.setup()
    return saver


async def make_async_checkpointer(settings: Settings):
    """An asyncio checkpointer for `graph.ainvoke` (AsyncSqliteSaver, or AsyncPostgresSaver)."""
    if is_postgres(settings):
        return await make_async_postgres_checkpointer(settings.storage.url, checkpoint_serde())
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await aiosqlite.connect(str(sqlite_path(settings, CHECKPOINTS_DB)), timeout=30)
    for pragma in SQLITE_PRAGMAS:
        await conn.execute(f"PRAGMA {pragma}")
    saver = AsyncSqliteSaver(conn, serde=checkpoint_serde())
    await saver.setup()
    return saver
