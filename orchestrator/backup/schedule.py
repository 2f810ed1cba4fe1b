"""Backups on a schedule (`backup: {every: daily, keep: 7, to: PATH}`), made by Jarvis's own scheduler (the
reminder scheduler of `jarvis run` or `jarvis scheduler` looks at `run_if_due` every minute: App.scheduler's
`jobs`), and the record of every backup's outcome, scheduled or not: ran (where, how large), skipped
and why (the folder is not there: a disk not mounted; another backup is being made), failed and why. The record
is a few lines in the data folder (`backup-runs.jsonl`), read by the health checks, `jarvis doctor` and the
Settings view.

Only one backup is made at a time per data folder (a lock file), whatever the number of processes; a backup that
failed is tried again after `RETRY_S`, not at every tick. After each backup the schedule made, the oldest of its
backups in the folder beyond `keep` are deleted (only files named as Jarvis names them).
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from orchestrator.core.config import Settings

from .archive import SUFFIX
from .create import create_backup, default_folder

RUNS_FILE = "backup-runs.jsonl"
LOCK_FILE = "backup.lock"
KEEP_RUNS = 200
PERIODS = {"hourly": timedelta(hours=1), "daily": timedelta(days=1), "weekly": timedelta(weeks=1)}
RETRY_S = 15 * 60


def folder(settings: Settings) -> Path:
    return Path(settings.backup.to) if settings.backup.to else default_folder(settings)


def runs(settings: Settings) -> list[dict[str, Any]]:
    """The recorded outcomes, oldest first."""
    path = Path(settings.data_dir) / RUNS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for line in lines[-KEEP_RUNS:]:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash
    return found


def record(settings: Settings, outcome: str, why: str | None = None, **details: Any) -> dict[str, Any]:
    entry = {"at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "outcome": outcome, "why": why,
             **details}
    path = Path(settings.data_dir) / RUNS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = runs(settings)[-(KEEP_RUNS - 1):] + [entry]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    os.replace(tmp, path)
    return entry


def _at(run: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(run["at"])


def due(settings: Settings, now: datetime) -> bool:
    """A scheduled backup is due: none made within the period, and none tried within RETRY_S."""
    every = settings.backup.every
    if every is None:
        return False
    done = runs(settings)
    made = [r for r in done if r["outcome"] == "ran" and r.get("trigger") == "schedule"]
    if made and now - _at(made[-1]) < PERIODS[every]:
        return False
    tried = [r for r in done if r.get("trigger") == "schedule"]
    return not tried or (now - _at(tried[-1])).total_seconds() >= RETRY_S


def prune(where: Path, keep: int) -> list[Path]:
    """The oldest backups named as Jarvis names them, beyond `keep`, deleted."""
    made = sorted(where.glob(f"jarvis-*{SUFFIX}"), key=lambda p: p.stat().st_mtime)
    old = made[:-keep] if len(made) > keep else []
    for path in old:
        path.unlink(missing_ok=True)
    return old


def run_backup(settings: Settings, trigger: str, to: Path | None = None) -> dict[str, Any]:
    """Make one backup now and record its outcome (`trigger`: schedule, manual, ui); returns the record."""
    where = Path(to) if to is not None else folder(settings)
    if trigger != "manual" and settings.backup.to is not None and not Path(settings.backup.to).is_dir():
        return record(settings, "skipped", f"the folder {where} does not exist (a disk not mounted?): nothing "
                      "was written", trigger=trigger)
    lock_path = Path(settings.data_dir) / LOCK_FILE
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return record(settings, "skipped", "another backup was being made at the same time", trigger=trigger)
        try:
            made = create_backup(settings, where, low_priority=trigger != "manual")
        except Exception as exc:  # noqa: BLE001 - recorded and shown: the user must learn that it failed
            from orchestrator.core.disk_full import is_disk_full

            why = f"the disk of {where} is full" if is_disk_full(exc) else f"{type(exc).__name__}: {exc}"
            return record(settings, "failed", why, trigger=trigger)
        removed = prune(made.path.parent, settings.backup.keep) if trigger == "schedule" else []
        return record(settings, "ran", None, trigger=trigger, path=str(made.path), size=made.path.stat().st_size,
                      removed=[p.name for p in removed])


def run_if_due(settings: Settings, now: datetime | None = None) -> dict[str, Any] | None:
    now = now or datetime.now(timezone.utc)
    return run_backup(settings, "schedule") if due(settings, now) else None
