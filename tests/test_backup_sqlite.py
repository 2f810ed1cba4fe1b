"""The copy of a live SQLite database (orchestrator/backup/sqlite_parts.py): consistent while another process
writes to it all the time, and one file that needs no WAL beside it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading

from orchestrator.backup import sqlite_parts

WRITER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=30)
db.execute("PRAGMA journal_mode=WAL")
n = 0
while True:
    n += 1
    db.execute("INSERT INTO notes (text) VALUES (?)", (f"note {n}",))
    db.commit()
"""


def test_a_database_another_process_writes_all_the_time_is_copied_whole(tmp_path):
    path = tmp_path / "jarvis.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    db.executemany("INSERT INTO notes (text) VALUES (?)", [("x" * 400,) for _ in range(100_000)])  # ~10,000 pages
    db.commit()
    db.close()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    got: list = []
    try:
        copy = threading.Thread(target=lambda: got.append(sqlite_parts.snapshot(path, tmp_path / "staging")),
                                daemon=True)
        copy.start()
        copy.join(120)
        assert got, "the copy never finished while the database was being written"
    finally:
        writer.kill()
        writer.wait()
    described = got[0]
    image = tmp_path / "staging"
    assert sqlite_parts.integrity_problems(image) == []
    copied = sqlite3.connect(image)
    assert copied.execute("SELECT count(*) FROM notes").fetchone()[0] == described["tables"]["notes"] >= 100_000
    assert copied.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file, no WAL needed beside it


def test_a_copy_in_steps_holds_the_instant_it_began_though_a_write_lands_between_every_two_steps(tmp_path):
    """The copy is made in steps (PAGES_PER_STEP pages each, a backup no one waits for pausing between them), all
    from one read transaction: a write committed by another connection between two steps is not in the copy and
    does not start it again. Copied from a new read transaction at each step, every write would restart it."""
    path = tmp_path / "jarvis.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    db.executemany("INSERT INTO notes (text) VALUES (?)", [("x" * 400,) for _ in range(40_000)])  # ~4,000 pages
    db.commit()
    steps = []

    def write_between_steps() -> None:
        steps.append(1)
        assert len(steps) < 200, "the copy started again after a write: it would never finish on a busy Jarvis"
        db.execute("INSERT INTO notes (text) VALUES ('written while the copy ran')")
        db.commit()

    described = sqlite_parts.snapshot(path, tmp_path / "staging", between_steps=write_between_steps)
    db.close()
    assert len(steps) >= 3  # it was copied in steps, a write after each
    copied = sqlite3.connect(tmp_path / "staging")
    assert copied.execute("SELECT count(*) FROM notes").fetchone()[0] == described["tables"]["notes"] == 40_000
    assert sqlite_parts.integrity_problems(tmp_path / "staging") == []


def test_finding_the_databases_leaves_this_process_its_locks_on_them(tmp_path):
    """A scheduled backup runs in the `jarvis run` that has the databases open. Looking for them must not take
    that process's locks away (closing any descriptor of a file drops them all): another process's connection
    would then take the database for unused, checkpoint it and delete its WAL and shared memory under the live
    connection, whose next commits no other process would ever see."""
    path = tmp_path / "jarvis.sqlite"
    (tmp_path / "notes.txt").write_text("not a database")
    live = sqlite3.connect(path)
    live.execute("PRAGMA journal_mode=WAL")
    live.execute("CREATE TABLE notes (text TEXT)")
    live.execute("INSERT INTO notes VALUES ('before')")
    live.commit()
    assert sqlite_parts.find_databases(tmp_path) == [path]
    other = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(c.execute('SELECT count(*) FROM notes')" \
            ".fetchone()[0]); c.close()"
    assert subprocess.run([sys.executable, "-c", other, str(path)], capture_output=True, text=True,
                          check=True).stdout.strip() == "1"
    assert (tmp_path / "jarvis.sqlite-wal").exists(), "another process took the live database for unused"
    live.execute("INSERT INTO notes VALUES ('after')")
    live.commit()
    assert subprocess.run([sys.executable, "-c", other, str(path)], capture_output=True, text=True,
                          check=True).stdout.strip() == "2"
    live.close()
