"""`jarvis backup create`: one file with every database (copied while Jarvis runs), the data folder's other files,
the generated tools, the MCP server files and the settings file, and a manifest of them all.

Each SQLite database is copied with SQLite's backup API into a staging file beside the backup (deleted before the
next), so the backup needs the space of the file it writes plus its largest database. A full disk or any other
error removes what was written; the previous backups stay as they were.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestrator.core.config import Settings
from orchestrator.storage.engines import is_postgres

from . import files, postgres_parts, sqlite_parts
from .archive import PARTIAL, SUFFIX, remove_stale_partials, written
from .manifest import NAME as MANIFEST_NAME, Manifest
from .pacing import Pacer

STAGING = ".jarvis-backup-staging"
SECRETS_PART = "secrets/keyring.json"


@dataclass
class Created:
    path: Path
    manifest: Manifest


def default_folder(settings: Settings) -> Path:
    """`backups` beside the data folder (outside it: a backup does not hold the backups before it)."""
    data = Path(settings.data_dir)
    return data.parent / f"{data.name}-backups"


def target_path(to: Path | None, settings: Settings) -> Path:
    """`to` when it names a backup file, else a new name in the folder `to` (or the default folder)."""
    to = Path(to).expanduser() if to is not None else default_folder(settings)
    if to.name.endswith(SUFFIX):
        return to.resolve()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    candidate, n = to / f"jarvis-{stamp}{SUFFIX}", 1
    while candidate.exists():
        n += 1
        candidate = to / f"jarvis-{stamp}-{n}{SUFFIX}"
    return candidate.resolve()


# How much lower than its caller's the backup thread's CPU priority is. Its I/O priority follows it only under an
# I/O scheduler that honours priorities (BFQ); mq-deadline and none ignore them: the pacing (`pacing.py`) is what
# keeps the disk and the caches for the turns there.
NICE = 10


def _at_low_priority(work: Callable[[], Created]) -> Created:
    """`work()` on a thread of its own whose CPU priority is lowered by NICE: a backup made while Jarvis answers
    takes the time the turns leave. A thread of its own, as a priority
    lowered cannot be raised again without privileges: the caller's thread (a web request's) is left as it was."""
    done: dict[str, Any] = {}

    def run() -> None:
        tid = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE))
        except (OSError, AttributeError):
            pass  # a system without per-thread priorities: the backup runs at its caller's
        try:
            done["made"] = work()
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            done["error"] = exc

    thread = threading.Thread(target=run, name="jarvis-backup", daemon=True)
    thread.start()
    thread.join()
    if "error" in done:
        raise done["error"]
    return done["made"]


def create_backup(settings: Settings, to: Path | None = None, *, secrets: dict[str, str] | None = None,
                  passphrase: str | None = None, low_priority: bool = False) -> Created:
    """Write the backup; `secrets` (names and values from the keyring) go in only with a `passphrase`, which
    encrypts the whole file. `low_priority`: made on a thread of lower priority (`_at_low_priority`) that works in
    short bursts with pauses between them (`pacing.Pacer`), for a backup no one waits for while Jarvis serves
    turns (the scheduled one, Settings' button): it then takes about four times as long, longer on a busy
    machine."""
    if low_priority:
        return _at_low_priority(lambda: _create(settings, to, secrets=secrets, passphrase=passphrase,
                                                pace=Pacer()))
    return _create(settings, to, secrets=secrets, passphrase=passphrase)


def _create(settings: Settings, to: Path | None, *, secrets: dict[str, str] | None, passphrase: str | None,
            pace: Callable[[], None] | None = None) -> Created:
    if secrets and not passphrase:
        raise ValueError("secrets go into a backup only when it is encrypted with a passphrase")
    final = target_path(to, settings)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(final.parent)
    staging = final.parent / f"{STAGING}.{os.getpid()}{PARTIAL}"
    staging.mkdir(exist_ok=True)
    manifest = Manifest(storage="postgresql" if is_postgres(settings) else "sqlite", secrets=bool(secrets))
    wrap = None
    if passphrase:
        from .crypto import encrypting

        wrap = encrypting(passphrase)
    try:
        with written(final, wrap, pace) as out:
            data = Path(settings.data_dir)
            databases = sqlite_parts.find_databases(data)
            with sqlite_parts.one_instant(databases) as sources:
                for db, src in zip(databases, sources):
                    name, copy = f"{files.DB}/{db.relative_to(data).as_posix()}", staging / "db.sqlite"
                    described = sqlite_parts.snapshot(db, copy, src, between_steps=pace)
                    src.close()  # its snapshot is copied: the WAL may be checkpointed past it again
                    manifest.parts.append({**out.add_file(name, copy), "kind": "sqlite", **described})
                    copy.unlink()
            if is_postgres(settings):
                dump = staging / "postgres.dump"
                described = postgres_parts.dump(settings.storage.url, dump)
                manifest.parts.append({**out.add_file("pg/jarvis.dump", dump), "kind": "postgresql", **described})
                dump.unlink()
            for name, path in files.plain_files(settings, skip={final.parent, staging}):
                manifest.parts.append({**out.add_file(name, path), "kind": "file"})
            if secrets:
                import json

                blob = json.dumps(secrets, sort_keys=True).encode()
                manifest.parts.append({**out.add_bytes(SECRETS_PART, blob), "kind": "secrets"})
            out.add_bytes(MANIFEST_NAME, manifest.to_json())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Created(final, manifest)
