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
    pieces, described = got[0]
    image = tmp_path / "copy.sqlite"
    image.write_bytes(b"".join(bytes(p) for p in pieces))
    assert sqlite_parts.integrity_problems(image) == []
    copied = sqlite3.connect(image)
    assert copied.execute("SELECT count(*) FROM notes").fetchone()[0] == described["tables"]["notes"] >= 100_000
    assert copied.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file, no WAL needed beside it
