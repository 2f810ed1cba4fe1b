"""Backups that must not be restored, and backups that must not be left half made: a truncated, tampered or
newer file is refused with a sentence saying why and nothing written; a backup killed or out of disk leaves no file
that looks complete and the previous one whole."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from orchestrator.backup.create import create_backup
from tests.backup_helpers import other_machine, rewrite, with_manifest


def _some_data(env) -> None:
    from orchestrator.reminders import ReminderRequest, ReminderStore

    ReminderStore(env.settings).create(ReminderRequest(title="call mum", when="2030-01-01T10:00", thread_id="t"))
    uploads = env.data / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    (uploads / "note.txt").write_text("the upload the user dropped")


def _refused(new, backup, *words: str) -> str:
    out = new.cli("backup", "restore", str(backup))
    assert out.returncode == 1, out.stdout
    for word in words:
        assert word in out.stderr, out.stderr
    assert not new.data.exists() or not any(new.data.iterdir()), "a refused restore wrote into the data folder"
    return out.stderr


def test_a_truncated_a_tampered_and_a_newer_backup_are_refused_with_why(jarvis_env, tmp_path):
    _some_data(jarvis_env)
    good = create_backup(jarvis_env.settings, tmp_path / "b").path
    new = other_machine(jarvis_env, tmp_path / "new")
    raw = good.read_bytes()

    cut = tmp_path / "cut.jarvis-backup"
    cut.write_bytes(raw[: len(raw) // 2])
    _refused(new, cut, "nothing was restored", "truncated")
    cut.write_bytes(raw[: raw.rindex(b'"format"')])  # every part there, the manifest cut
    _refused(new, cut, "truncated")

    changed = tmp_path / "changed.jarvis-backup"
    changed.write_bytes(raw.replace(b"the upload the user dropped", b"the upload the user DROPPED"))
    _refused(new, changed, "tampered", "data/uploads/note.txt", "sha256")

    extra = tmp_path / "extra.jarvis-backup"
    rewrite(good, extra, lambda name, data: data)
    with_manifest(good, extra, parts=[])  # parts the manifest does not list
    _refused(new, extra, "tampered", "not in its manifest")

    newer = tmp_path / "newer.jarvis-backup"
    with_manifest(good, newer, format=99, jarvis_version="9.0")
    _refused(new, newer, "newer Jarvis", "9.0", "upgrade Jarvis")
    newer_schema = tmp_path / "newer-schema.jarvis-backup"
    with_manifest(good, newer_schema, schema_latest=999)
    _refused(new, newer_schema, "newer Jarvis", "schema version 999")

    assert new.cli("backup", "restore", str(good)).returncode == 0  # the same folder takes the whole one


def test_a_restore_onto_data_is_refused_unless_forced_and_then_the_data_is_moved_aside(jarvis_env, tmp_path):
    _some_data(jarvis_env)
    backup = create_backup(jarvis_env.settings, tmp_path / "b").path
    out = jarvis_env.cli("backup", "restore", str(backup))
    assert out.returncode == 1 and "already holds data" in out.stderr and "--force" in out.stderr, out.stderr
    (jarvis_env.data / "uploads" / "note.txt").write_text("written after the backup")
    forced = jarvis_env.cli("backup", "restore", str(backup), "--force", check=True)
    assert "the data that was there is kept in" in forced.stdout
    (aside,) = tmp_path.glob("data.before-restore-*")
    assert (aside / "uploads" / "note.txt").read_text() == "written after the backup"
    assert (jarvis_env.data / "uploads" / "note.txt").read_text() == "the upload the user dropped"


def test_an_older_schema_is_brought_forward_by_the_restore(jarvis_env, tmp_path):
    from jarb_core.sql_schema import LATEST
    from orchestrator.server.schema_tables import migrate_whole_schema
    from orchestrator.storage.engines import dispose_all

    migrate_whole_schema(jarvis_env.settings)
    dispose_all()
    db = sqlite3.connect(jarvis_env.data / "jarvis.sqlite")
    db.execute("ALTER TABLE runs DROP COLUMN unreported_calls")  # as the release before step 2 made it
    db.execute("UPDATE schema_versions SET version = 1")
    db.commit()
    db.close()
    backup = create_backup(jarvis_env.settings, tmp_path / "b").path
    new = other_machine(jarvis_env, tmp_path / "new")
    new.cli("backup", "restore", str(backup), check=True)
    db = sqlite3.connect(new.data / "jarvis.sqlite")
    assert "unreported_calls" in {r[1] for r in db.execute("PRAGMA table_info(runs)")}
    assert {v for (v,) in db.execute("SELECT version FROM schema_versions")} == {LATEST}
    db.close()


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_kill_9_in_the_middle_leaves_the_previous_backup_and_nothing_that_looks_complete(jarvis_env, tmp_path):
    _some_data(jarvis_env)
    folder = tmp_path / "backups"
    jarvis_env.cli("backup", "create", "--to", str(folder), check=True)
    (previous,) = folder.glob("*.jarvis-backup")
    before = _sha(previous)
    with open(jarvis_env.data / "uploads" / "big.bin", "wb") as f:  # long enough to be caught midway
        for _ in range(64):
            f.write(os.urandom(1 << 20))
    proc = jarvis_env.popen("backup", "create", "--to", str(folder))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        partial = [p for p in folder.glob(".*.partial") if p.is_file() and p.stat().st_size > (1 << 20)]
        if partial or proc.poll() is not None:
            break
        time.sleep(0.005)
    assert proc.poll() is None, f"the backup ended before it could be killed: {proc.communicate()}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(folder.glob("*.jarvis-backup")) == [previous] and _sha(previous) == before
    (left,) = [p for p in folder.glob(".*.partial") if p.is_file()]
    new = other_machine(jarvis_env, tmp_path / "new")
    _refused(new, left, "truncated")
    # The next backup clears what the killed one left.
    jarvis_env.cli("backup", "create", "--to", str(folder), check=True)
    assert not list(folder.glob(".*.partial")) and len(list(folder.glob("*.jarvis-backup"))) == 2


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB filesystem (tmpfs), mounted for the test: root only."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True,
                         text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {out.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_with_a_sentence_and_leaves_nothing_that_looks_complete(jarvis_env, small_disk):
    _some_data(jarvis_env)
    with open(jarvis_env.data / "uploads" / "big.bin", "wb") as f:
        f.write(os.urandom(3 << 20))
    out = jarvis_env.cli("backup", "create", "--to", str(small_disk))
    assert out.returncode == 1, out.stdout
    assert "the backup could not be written" in out.stderr and "disk is full" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert list(small_disk.iterdir()) == [], "a backup that ran out of space left a file behind"
