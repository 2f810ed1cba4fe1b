"""Keeping an existing database's tables in step with the code: numbered migration steps and a version table
(shared by the tool registry and orchestrator.storage.engines; it lives here because jarb_core does not import
orchestrator).

Each table has its own row in `schema_versions` (table name, version, when): a process creates and migrates only
the tables of the modules it has imported (a light command never loads every model), so one number for the whole
database could not say which tables were brought up to date. A table created by this code is stamped with the
latest version at once; an older one runs the steps above its version, in one transaction with the new stamp.

Adding a column: add it nullable to the model and append a step (`Step(N, why, add_missing_columns_step)`), so
databases stamped before it get it on their next start. Other changes (a renamed column, a back-filled value)
are steps with their own function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import Column, Connection, DateTime, Integer, MetaData, String, Table, inspect, select, text

VERSION_TABLE = "schema_versions"

_versions_md = MetaData()
versions_table = Table(
    VERSION_TABLE, _versions_md,
    Column("table_name", String(128), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("migrated_at", DateTime(timezone=True), nullable=False),
)


def add_missing_columns(conn: Connection, metadata: MetaData, only: set[str] | None = None) -> list[str]:
    """Tables made by an earlier version of Jarvis lack the nullable columns added since: add them, so an
    existing database keeps working after an upgrade (new columns are always nullable for this reason).
    Returns the columns added, as "table.column"."""
    found = inspect(conn)
    added = []
    for table in metadata.sorted_tables:
        if (only is not None and table.name not in only) or not found.has_table(table.name):
            continue
        have = {c["name"] for c in found.get_columns(table.name)}
        for column in table.columns:
            if column.name not in have and column.nullable:
                conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} "
                                  f"{column.type.compile(conn.dialect)}"))
                added.append(f"{table.name}.{column.name}")
    return added


def add_missing_columns_step(conn: Connection, table: Table) -> list[str]:
    return add_missing_columns(conn, table.metadata, only={table.name})


@dataclass(frozen=True)
class Step:
    version: int
    why: str
    apply: Callable[[Connection, Table], list[str]]  # returns what it changed, for the log


STEPS: list[Step] = [
    Step(1, "tables made before the version table: add every nullable column added since they were created "
            "(what each start used to do without keeping a record)", add_missing_columns_step),
    Step(2, "runs.unreported_calls: model calls whose server reported no token usage", add_missing_columns_step),
]
LATEST = STEPS[-1].version


def _now() -> datetime:
    return datetime.now(timezone.utc)


def table_versions(conn: Connection) -> dict[str, int]:
    """{table name: version} as recorded; {} when the database has no version table (made before it)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return {}
    return {row.table_name: row.version for row in conn.execute(select(versions_table))}


def upgrade(conn: Connection, metadata: MetaData, steps: list[Step] | None = None) -> list[str]:
    """Create the missing tables of `metadata` and bring the others to the latest step, inside the caller's
    transaction (the caller holds the database's write lock, so two processes starting together do not both
    migrate). Tables made here are stamped without running the steps. Returns what changed."""
    steps = STEPS if steps is None else steps
    latest = steps[-1].version
    before = set(inspect(conn).get_table_names())
    metadata.create_all(conn)
    _versions_md.create_all(conn)
    have = table_versions(conn)
    changed: list[str] = []
    for table in metadata.sorted_tables:
        version = have.get(table.name)
        if version is not None and version >= latest:
            continue
        if table.name in before:
            for step in steps:
                if step.version > (version or 0):
                    changed += step.apply(conn, table)
        values = {"version": latest, "migrated_at": _now()}
        if version is None:
            conn.execute(versions_table.insert().values(table_name=table.name, **values))
        else:
            conn.execute(versions_table.update().where(versions_table.c.table_name == table.name).values(**values))
    return changed


def behind(conn: Connection, metadata: MetaData) -> list[str]:
    """Tables of `metadata` that exist and are not at the latest version or lack a column of the code: what
    `jarvis doctor` calls a schema that is not current."""
    found = inspect(conn)
    have = table_versions(conn)
    late = []
    for table in metadata.sorted_tables:
        if not found.has_table(table.name):
            continue
        columns = {c["name"] for c in found.get_columns(table.name)}
        missing = [c.name for c in table.columns if c.name not in columns]
        if have.get(table.name, 0) < LATEST or missing:
            late.append(table.name + (f" (no column {', '.join(missing)})" if missing else ""))
    return late
