"""Upgrades: a database made by an earlier Jarvis (its schema in tests/data/schema, written by that commit's own
code through scripts/dump_old_schema.py) is migrated in place on the next start, by the numbered steps of
jarb_core/sql_schema.py, and recorded in its version table."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from jarb_core import sql_schema
from orchestrator.core.config import settings_from_dict
from orchestrator.storage.engines import Base, dispose_all, engine_for, ensure_schema, sqlite_path

SCHEMAS = Path(__file__).parent / "data" / "schema"
OLD = ["a12ba1e", "aeea0bf"]  # the end of the 2026-11-23 round, and the first day's


def _all_tables() -> None:
    from orchestrator.server.schema_tables import import_table_modules

    import_table_modules()


def _columns(path: Path) -> dict[str, list[str]]:
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                           "'sqlite_%' ORDER BY name")]
        return {t: sorted(r[1] for r in db.execute(f"PRAGMA table_info({t})")) for t in tables}


def _settings(folder: Path):
    return settings_from_dict({"storage": {"data_dir": str(folder)}}, folder)


@pytest.fixture(autouse=True)
def _fresh_engines():
    dispose_all()
    yield
    dispose_all()


@pytest.mark.parametrize("commit", OLD)
def test_the_previous_release_s_jarvis_database_is_migrated_in_place(tmp_path, commit):
    _all_tables()
    fresh = _settings(tmp_path / "fresh")
    ensure_schema(engine_for(fresh))
    dispose_all()

    old = _settings(tmp_path / "old")
    path = sqlite_path(old, "jarvis")
    with sqlite3.connect(path) as db:
        db.executescript((SCHEMAS / f"jarvis-{commit}.sql").read_text(encoding="utf-8"))
        db.execute("INSERT INTO effects_ledger (key, thread_id, tool, args_json, side_effects, status, result_text, "
                   "result_ok, pid, host, started_at, completed_at) VALUES ('k-then', 't', 'fs_write_text', '{}', "
                   "'[]', 'completed', 'done', 1, 1, 'h', '2026-01-01 00:00:00', '2026-01-01 00:00:01')")
    engine = engine_for(old)
    with engine.connect() as conn:
        late = sql_schema.behind(conn, Base.metadata)
    assert any(t.startswith("effects_ledger (no column") and "requested" in t for t in late)  # as jarvis doctor says

    from orchestrator.tools.ledger import EffectsLedger

    ledger = EffectsLedger(old)  # a start: the stores open the database
    assert ledger.get("k-then").result_text == "done"
    assert _columns(path) == _columns(sqlite_path(fresh, "jarvis"))
    with engine.connect() as conn:
        assert sql_schema.behind(conn, Base.metadata) == []
        versions = sql_schema.table_versions(conn)
    assert set(versions) == set(Base.metadata.tables) and set(versions.values()) == {sql_schema.LATEST}
    assert ledger.begin("k-now", "t", "fs_write_text", {}, ["fs_write"])  # the new column is written


@pytest.mark.parametrize("commit", OLD)
def test_the_previous_release_s_tool_registry_is_migrated(tmp_path, commit):
    from jarb_core.registry import ToolRegistry

    path = tmp_path / "tool_registry.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript((SCHEMAS / f"tool_registry-{commit}.sql").read_text(encoding="utf-8"))
    ToolRegistry(create_engine(f"sqlite:///{path}"))
    columns = _columns(path)
    assert {"source", "tests_source"} <= set(columns["generated_tools"])
    assert "schema_versions" in columns


def test_a_step_runs_once_and_a_later_step_only_on_tables_stamped_before_it(tmp_path):
    from sqlalchemy import Column, Integer, MetaData, String, Table, inspect

    calls: list[str] = []

    def second(conn, table):
        calls.append(table.name)
        return sql_schema.add_missing_columns_step(conn, table)

    md = MetaData()
    Table("notes", md, Column("id", Integer, primary_key=True))
    engine = create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    with engine.begin() as conn:
        assert sql_schema.upgrade(conn, md) == []  # made here: stamped, no step runs
        assert sql_schema.table_versions(conn) == {"notes": sql_schema.LATEST}

    md2 = MetaData()  # the next release adds a column, and a step for it
    Table("notes", md2, Column("id", Integer, primary_key=True), Column("text", String(20), nullable=True))
    steps = [*sql_schema.STEPS, sql_schema.Step(sql_schema.LATEST + 1, "notes get text", second)]
    with engine.begin() as conn:
        assert sql_schema.upgrade(conn, md2, steps) == ["notes.text"]
    with engine.begin() as conn:
        assert sql_schema.upgrade(conn, md2, steps) == []
        assert sql_schema.table_versions(conn) == {"notes": sql_schema.LATEST + 1}
        assert "text" in [c["name"] for c in inspect(conn).get_columns("notes")]
    assert calls == ["notes"]


def test_every_module_with_tables_is_listed_for_the_schema_check():
    """jarvis doctor and the health report check the schema of the tables of schema_tables.TABLE_MODULES: a new
    module with tables that is not listed there would never be called out of date."""
    import ast

    from orchestrator.server.schema_tables import TABLE_MODULES

    root = Path(__file__).resolve().parent.parent
    defining = set()
    for path in (root / "orchestrator").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.ClassDef) and any(getattr(b, "id", None) == "Base" for b in n.bases)
               for n in ast.walk(tree)):
            defining.add(".".join(path.relative_to(root).with_suffix("").parts))
    assert defining and defining <= set(TABLE_MODULES), defining - set(TABLE_MODULES)


def test_jarvis_run_migrates_the_whole_database_at_start(jarvis_env):
    """`make run` after a `git pull`: jarvis run brings every table up to date when it starts (the tables of every
    part, also those its graph does not use: server/schema_tables.migrate_whole_schema), so jarvis doctor finds the
    schema current at once."""
    import signal
    import subprocess

    from tests.conftest import JARVIS_BIN, wait_until_up

    _all_tables()
    jarvis_env.data.mkdir(exist_ok=True)
    path = jarvis_env.data / "jarvis.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript((SCHEMAS / f"jarvis-{OLD[0]}.sql").read_text(encoding="utf-8"))
    jarvis_env.write_config(server={"port": 0})
    proc = subprocess.Popen([str(JARVIS_BIN), "run", "--no-services"], env=jarvis_env.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()
        assert "running at" in line
        wait_until_up(re.search(r"running at (http://[^/\s]+)", line).group(1))  # migrated before it is up
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert sql_schema.behind(conn, Base.metadata) == []
        assert set(sql_schema.table_versions(conn)) >= {"effects_ledger", "android_tasks", "reminders"}
    engine.dispose()
