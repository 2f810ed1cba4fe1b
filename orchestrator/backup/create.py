"""`jarvis backup create`: one file with every database (copied while Jarvis runs), the data folder's other files,
the generated tools, the MCP server files and the settings file, and a manifest of them all.

Each SQLite database is copied with SQLite's backup API into memory (or, when large, a staging file beside the
backup, deleted before the next), so the backup needs the space of the file it writes plus one large database. A
full disk or any other error removes what was written; the previous backups stay as they were.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from orchestrator.core.config import Settings
from orchestrator.storage.engines import is_postgres

from . import files, postgres_parts, sqlite_parts
from .archive import PARTIAL, SUFFIX, remove_stale_partials, written
from .manifest import NAME as MANIFEST_NAME, Manifest

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


def create_backup(settings: Settings, to: Path | None = None, *, secrets: dict[str, str] | None = None,
                  passphrase: str | None = None) -> Created:
    """Write the backup; `secrets` (names and values from the keyring) go in only with a `passphrase`, which
    encrypts the whole file."""
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
        with written(final, wrap) as out:
            data = Path(settings.data_dir)
            databases = sqlite_parts.find_databases(data)
            with sqlite_parts.one_instant(databases) as sources:
                for db, src in zip(databases, sources):
                    name, copy = f"{files.DB}/{db.relative_to(data).as_posix()}", staging / "db.sqlite"
                    image, described = sqlite_parts.snapshot(db, copy, src)
                    src.close()  # its snapshot is copied: the WAL may be checkpointed past it again
                    part = out.add_bytes(name, image) if image is not None else out.add_file(name, copy)
                    manifest.parts.append({**part, "kind": "sqlite", **described})
                    copy.unlink(missing_ok=True)
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
