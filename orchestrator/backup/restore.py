"""`jarvis backup restore` and `--verify`: a backup read into a staging folder and checked whole (every part
present once and as the manifest hashed it, every database passing `PRAGMA integrity_check` with the row counts
the manifest recorded, nothing from a newer Jarvis) before a single file of the data folder is written. Then the
parts are moved into the folders this machine's settings name, and the schema is brought forward.

A data folder that already holds data is not written over unless told (`force`): it is then moved aside whole, to
`<data>.before-restore-<time>`, rather than deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO, Iterator

from orchestrator.core.config import Settings
from orchestrator.storage.engines import is_postgres

from . import files, postgres_parts, sqlite_parts
from .archive import PARTIAL, extract
from .manifest import BackupRefused, Manifest


def _forget_claims(settings: Settings) -> None:
    """The work claims restored name the workers that ran on the data when it was backed up, and none of them runs
    on this copy: left, a claim would keep the jorb (or chat turn) it held from being taken up again until its
    lease ran out (storage.claim_lease_s, minutes), and in the process that made the backup for ever."""
    from sqlalchemy import delete

    from orchestrator.storage.claims import ClaimRow
    from orchestrator.storage.engines import jarvis_engine

    with jarvis_engine(settings).begin() as conn:
        conn.execute(delete(ClaimRow))


@dataclass
class Checked:
    manifest: Manifest
    staging: Path
    problems: list[str] = field(default_factory=list)


@dataclass
class Restored:
    manifest: Manifest
    moved_aside: Path | None
    settings_file: Path | None
    secrets: list[str]


@contextmanager
def _opened(source: Path, passphrase: str | None) -> Iterator[tuple[BinaryIO, bool]]:
    """The archive's bytes, and whether the file was sealed with a passphrase."""
    from .crypto import MAGIC, decrypting

    if not source.is_file():
        raise BackupRefused(f"{source} is not a file")
    with open(source, "rb") as f:
        encrypted = f.read(len(MAGIC)) == MAGIC
        f.seek(0)
        if not encrypted:
            yield f, False
            return
        if not passphrase:
            raise BackupRefused("this backup is encrypted (it holds secrets): give its passphrase")
        yield decrypting(f, passphrase), True


@contextmanager
def checked(source: Path, staging_parent: Path, passphrase: str | None = None) -> Iterator[Checked]:
    """The backup extracted into a staging folder under `staging_parent` and checked; refused (BackupRefused)
    with the reason when anything is wrong. The staging folder is removed when the block ends."""
    staging_parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".jarvis-restore.{os.getpid()}.", suffix=PARTIAL, dir=staging_parent))
    try:
        with _opened(Path(source), passphrase) as (stream, encrypted):
            raw, found = extract(stream, staging)
        manifest = Manifest.from_json(raw)
        manifest.refuse_if_newer()
        _check_parts(manifest, found)
        if not encrypted and (manifest.secrets or any(p["kind"] == "secrets" for p in manifest.parts)):
            # Jarvis seals every backup that holds secrets: an open one would write anyone's keys into the keyring.
            raise BackupRefused("this backup holds secrets but is not encrypted: Jarvis never makes such a file, "
                                "it was tampered with")
        for part in manifest.parts:
            if part["kind"] == "sqlite":
                _check_database(staging / part["name"], part)
        yield Checked(manifest, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_parts(manifest: Manifest, found: dict[str, dict]) -> None:
    listed = {p["name"] for p in manifest.parts}
    if missing := sorted(listed - set(found)):
        raise BackupRefused(f"the backup is truncated or damaged: {', '.join(missing[:5])} is missing")
    if extra := sorted(set(found) - listed):
        raise BackupRefused(f"the backup was tampered with: {', '.join(extra[:5])} is not in its manifest")
    for part in manifest.parts:
        got = found[part["name"]]
        if got["sha256"] != part["sha256"] or got["size"] != part["size"]:
            raise BackupRefused(f"the backup was tampered with or damaged: {part['name']} does not match the "
                                "sha256 its manifest recorded")


def _check_database(path: Path, part: dict) -> None:
    if problems := sqlite_parts.integrity_problems(path):
        raise BackupRefused(f"the database {part['name']} in the backup is damaged: {'; '.join(problems[:3])}")
    counts = sqlite_parts.describe(path)["tables"]
    if counts != part.get("tables", {}):
        raise BackupRefused(f"the database {part['name']} in the backup does not hold the rows its manifest "
                            "counted: it was tampered with")


def verify_backup(source: Path, passphrase: str | None = None) -> Manifest:
    """Restore `source` into a temporary folder beside it (on its disk, not in a /tmp that may be small) and check
    it (what `create --verify` runs)."""
    with checked(source, Path(source).resolve().parent, passphrase) as done:
        for part in done.manifest.parts:
            if part["kind"] == "postgresql":
                postgres_parts.check_dump(done.staging / part["name"])
        return done.manifest


def occupied(settings: Settings, parts: list[dict]) -> list[str]:
    """What restoring `parts` would write over: the data folder's data, a table of the PostgreSQL database, a tool
    or MCP file with other content."""
    found: list[str] = []
    data = Path(settings.data_dir)
    if sqlite_parts.find_databases(data) or any(files.plain_files(_only_data(settings), skip=set())):
        found.append(f"the data folder {data} already holds data")
    if is_postgres(settings) and postgres_parts.has_tables(settings.storage.url):
        found.append("the PostgreSQL database of storage.url already has tables")
    for part in parts:
        dest = files.destination(settings, part["name"])
        if (part["name"].startswith((files.TOOLS + "/", files.MCP + "/")) and dest is not None and dest.is_file()
                and _sha256(dest) != part["sha256"]):
            found.append(f"{dest} exists with other content")
    return found


def _sha256(path: Path) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _only_data(settings: Settings) -> Settings:
    """These settings with no settings file, tools or MCP folder of their own: the data folder alone."""
    copy = settings.model_copy(deep=True)
    copy.source_path = None
    copy.tools_dir = copy.mcp.dir = Path(settings.data_dir) / ".none"
    return copy


def _move_aside(data: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    aside = data.with_name(f"{data.name}.before-restore-{stamp}")
    os.replace(data, aside)
    return aside


def restore_backup(settings: Settings, source: Path, *, force: bool = False, passphrase: str | None = None,
                   migrate: Callable[[Settings], None] | None = None, put_secret=None) -> Restored:
    """Restore `source` onto this machine's folders (and PostgreSQL database); `migrate(settings)` brings the
    schema forward afterwards; `put_secret(name, value)` stores the secrets of an encrypted backup."""
    data = Path(settings.data_dir)
    with checked(source, data.parent, passphrase) as done:
        manifest = done.manifest
        kinds = {p["kind"] for p in manifest.parts}
        if "postgresql" in kinds and not is_postgres(settings):
            raise BackupRefused("this backup holds a PostgreSQL database and this Jarvis keeps SQLite files: set "
                                "storage.url to an empty PostgreSQL database, then restore")
        if manifest.storage == "sqlite" and is_postgres(settings):
            raise BackupRefused("this backup holds SQLite databases and this Jarvis's storage.url is PostgreSQL: "
                                "restore with storage.url unset (SQLite), then move to PostgreSQL")
        if (taken := occupied(settings, manifest.parts)) and not force:
            raise BackupRefused(f"nothing was restored: {'; '.join(taken[:4])} (restore onto an empty data folder, "
                                "or add --force to move the data folder aside and write over the rest)")
        moved_aside = _move_aside(data) if force and data.exists() and taken else None
        settings_file, secret_names = None, []
        for part in manifest.parts:
            staged = done.staging / part["name"]
            if part["kind"] == "postgresql":
                postgres_parts.restore(settings.storage.url, staged, clean=force)
                continue
            if part["kind"] == "secrets":
                values = json.loads(staged.read_bytes())
                for name, value in values.items():
                    if put_secret is not None:
                        put_secret(name, value)
                    secret_names.append(name)
                continue
            dest = files.destination(settings, part["name"])
            if dest is None:  # the old machine's settings file: kept for the user to compare, not put in use
                dest = settings_file = data / "settings-from-backup" / Path(part["name"]).name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staged), str(dest))
    if migrate is not None:
        migrate(settings)
    _forget_claims(settings)
    return Restored(manifest, moved_aside, settings_file, secret_names)
