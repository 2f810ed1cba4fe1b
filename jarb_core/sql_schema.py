"""Keeping an existing database's tables in step with the code (shared by the tool registry and
orchestrator.storage.engines; it lives here because jarb_core does not import orchestrator)."""

from __future__ import annotations

from sqlalchemy import Connection, MetaData, inspect, text


def add_missing_columns(conn: Connection, metadata: MetaData) -> None:
    """Tables made by an earlier version of Jarvis lack the nullable columns added since: add them, so an
    existing database keeps working after an upgrade (new columns are always nullable for this reason)."""
    found = inspect(conn)
    for table in metadata.sorted_tables:
        if not found.has_table(table.name):
            continue
        have = {c["name"] for c in found.get_columns(table.name)}
        for column in table.columns:
            if column.name not in have and column.nullable:
                conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} "
                                  f"{column.type.compile(conn.dialect)}"))
