"""Kept sqlite3 connections (core/kept_sqlite.py): the reads made on every turn, the trim after it."""

from __future__ import annotations

import sqlite3

from orchestrator.core.kept_sqlite import data_version, first_row


def _make(path, rows: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE facts (x)")
    conn.executemany("INSERT INTO facts VALUES (?)", [(i,) for i in range(rows)])
    conn.commit()
    conn.close()


def test_a_watch_sees_other_connections_commits(tmp_path):
    path = str(tmp_path / "w.sqlite")
    _make(path, 0)
    assert first_row(path, "SELECT 1 FROM facts LIMIT 1") is None
    before = data_version(path)
    other = sqlite3.connect(path)
    other.execute("INSERT INTO facts VALUES (1)")
    other.commit()
    assert first_row(path, "SELECT 1 FROM facts LIMIT 1") == (1,)
    assert data_version(path) != before


def test_a_file_made_again_at_the_same_path_is_read_not_the_old_one(tmp_path):
    # A data folder restored from a backup, or made anew: the kept connection still had the old file open, deleted
    # or not, and read its rows.
    path = tmp_path / "r.sqlite"
    _make(str(path), 3)
    assert first_row(str(path), "SELECT COUNT(*) FROM facts") == (3,)
    seen = data_version(str(path))
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"r.sqlite{suffix}").unlink(missing_ok=True)
    _make(str(path), 1)
    assert first_row(str(path), "SELECT COUNT(*) FROM facts") == (1,)
    assert data_version(str(path))[0] != seen[0]  # another connection: the registry reads its table again
