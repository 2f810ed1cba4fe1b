"""Scheduled backups ([34]): made when due by Jarvis's reminder scheduler, old ones pruned, every outcome (ran, skipped
and why, failed and why) recorded and shown by `jarvis doctor` and the Settings view, whose button makes one."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from orchestrator.backup.schedule import due, run_backup, run_if_due, runs
from orchestrator.server.health import backup_check
from tests.ui_server import start_ui


def test_scheduled_backups_run_when_due_keep_the_last_few_and_say_why_they_were_skipped_or_failed(jarvis_env,
                                                                                                   tmp_path):
    folder = tmp_path / "backups"
    folder.mkdir()
    jarvis_env.write_config(backup={"every": "daily", "keep": 2, "to": str(folder)})
    settings = jarvis_env.settings
    assert backup_check(settings).ok is None  # scheduled, none made yet
    now = datetime.now(timezone.utc)
    assert due(settings, now)
    first = run_if_due(settings)
    assert first["outcome"] == "ran" and first["trigger"] == "schedule"
    assert run_if_due(settings) is None and not due(settings, now + timedelta(hours=23))
    assert due(settings, now + timedelta(days=1, minutes=1))
    for _ in range(2):
        assert run_backup(settings, "schedule")["outcome"] == "ran"
    kept = sorted(p.name for p in folder.glob("*.jarvis-backup"))
    assert len(kept) == 2 and first["path"].rsplit("/", 1)[-1] not in kept  # the oldest went
    assert backup_check(settings).ok is True

    jarvis_env.write_config(backup={"every": "daily", "to": str(tmp_path / "unmounted")})
    skipped = run_backup(jarvis_env.settings, "schedule")
    assert skipped["outcome"] == "skipped" and "does not exist" in skipped["why"]
    assert not (tmp_path / "unmounted").exists()
    shown = backup_check(jarvis_env.settings)
    assert shown.ok is False and "skipped" in shown.detail and "does not exist" in shown.detail

    jarvis_env.write_config(backup={"every": "daily", "to": str(folder)})
    (jarvis_env.data / "damaged.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    failed = run_backup(jarvis_env.settings, "schedule")
    assert failed["outcome"] == "failed" and "DatabaseError" in failed["why"], failed
    out = jarvis_env.cli("doctor", "--json")
    doctor = next(c for c in json.loads(out.stdout)["checks"] if c["name"] == "backups")
    assert out.returncode != 0 and doctor["ok"] is False and "failed" in doctor["detail"], doctor
    assert [r["outcome"] for r in runs(jarvis_env.settings)] == ["ran", "ran", "ran", "skipped", "failed"]
    assert len(list(folder.glob("*.jarvis-backup"))) == 2 and not list(folder.glob(".*"))


def test_the_settings_view_shows_the_last_backup_and_its_button_makes_one(jarvis_env, tmp_path):
    folder = tmp_path / "backups"
    folder.mkdir()
    jarvis_env.write_config(backup={"to": str(folder)})
    with start_ui(jarvis_env) as server:
        with server.client() as c:
            (section,) = [s for s in c.get("/api/settings/health").json()["sections"] if s["title"] == "Backups"]
            assert section["items"][0]["ok"] is None and "no backup made yet" in section["items"][0]["message"]
            assert section["action"] == {"label": "Back up now", "post": "/api/backup"}
            made = c.post("/api/backup").json()
            assert made["outcome"] == "ran" and made["trigger"] == "ui"
            (section,) = [s for s in c.get("/api/settings/health").json()["sections"] if s["title"] == "Backups"]
            assert section["items"][0]["ok"] is True and made["path"] in section["items"][0]["message"]
    assert len(list(folder.glob("*.jarvis-backup"))) == 1


def test_jarvis_run_s_reminder_scheduler_makes_the_backup_that_is_due(jarvis_env, tmp_path):
    from tests.reminder_helpers import wait_for

    folder = tmp_path / "backups"
    folder.mkdir()
    jarvis_env.write_config(backup={"every": "hourly", "to": str(folder)})
    with start_ui(jarvis_env, services=["orchestrator.server.services:reminder_scheduler_service"]) as server:
        made = wait_for(lambda: runs(jarvis_env.settings), timeout=60)
        with server.client() as c:
            (service,) = [s for s in c.get("/api/settings").json()["services"] if s["name"] == "reminder-scheduler"]
    assert [r["outcome"] for r in made] == ["ran"] and made[0]["trigger"] == "schedule"
    assert service["state"] == "running" and len(list(folder.glob("*.jarvis-backup"))) == 1


def test_backups_scheduled_with_the_scheduler_off_are_shown_as_never_made(jarvis_env, tmp_path):
    """The scheduler makes the scheduled backups: with it off, none is ever made, and the health check says so."""
    jarvis_env.write_config(backup={"every": "daily", "to": str(tmp_path)}, scheduler={"enabled": False})
    shown = backup_check(jarvis_env.settings)
    assert shown.ok is False and "the scheduler is off" in shown.detail
    jarvis_env.write_config(backup={"every": "daily", "to": str(tmp_path)})
    assert backup_check(jarvis_env.settings).ok is None


def test_a_backup_at_low_priority_runs_niced_on_its_own_thread_and_leaves_the_caller_as_it_was():
    """A scheduled backup (or Settings' button) takes the CPU the turns leave; lowering a thread's priority cannot
    be undone, so the caller's thread (a web request's, reused) must keep its own."""
    import os
    import threading

    from orchestrator.backup.create import NICE, _at_low_priority

    def niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    mine = niceness()
    assert _at_low_priority(niceness) == min(19, mine + NICE)
    assert niceness() == mine

    def full() -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        _at_low_priority(full)


def test_a_backup_no_one_waits_for_pauses_between_its_steps_and_one_made_for_the_user_does_not(jarvis_env,
                                                                                               monkeypatch):
    """A scheduled backup (or Settings' button) works in bursts, pausing after each step of a database's copy and
    after each piece of a file written into the archive, so a turn that runs meanwhile has the machine; `jarvis
    backup create`, which the user waits for, does not pause. Both hold the same data."""
    import sqlite3
    from pathlib import Path

    from orchestrator.backup import pacing, sqlite_parts
    from orchestrator.backup.archive import CHUNK
    from orchestrator.backup.create import create_backup

    settings = jarvis_env.settings
    data = Path(settings.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(data / "big.sqlite")
    db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    db.executemany("INSERT INTO notes (text) VALUES (?)", [("x" * 400,) for _ in range(40_000)])  # ~4,000 pages
    db.commit()
    db.close()
    size = (data / "big.sqlite").stat().st_size
    steps = -(-size // (sqlite_parts.PAGES_PER_STEP * 4096))
    calls: list[float] = []
    monkeypatch.setattr(pacing.time, "sleep", calls.append)  # the pauses asked for, not slept

    low = create_backup(settings, jarvis_env.path / "low", low_priority=True)
    assert len(calls) >= (steps - 1) + (size // CHUNK - 1) >= 10, calls
    assert all(c >= 0 for c in calls)
    paced = len(calls)
    mine = create_backup(settings, jarvis_env.path / "mine")
    assert len(calls) == paced  # no pause
    assert low.manifest.part("db/big.sqlite")["sha256"] == mine.manifest.part("db/big.sqlite")["sha256"]


def test_the_pace_rests_three_times_as_long_as_it_worked_at_a_quarter_share(monkeypatch):
    from orchestrator.backup import pacing

    clock = [100.0]
    slept: list[float] = []
    monkeypatch.setattr(pacing.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(pacing.time, "sleep", lambda s: (slept.append(s), clock.__setitem__(0, clock[0] + s)))
    pace = pacing.Pacer(share=0.25)
    clock[0] += 0.02  # a step that took 20 ms
    pace()
    clock[0] += 0.004
    pace()
    assert slept == [pytest.approx(0.06), pytest.approx(0.012)]
