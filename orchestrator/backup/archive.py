"""The backup file: a tar archive, written under a temporary name in the target folder, fsynced and renamed into
place only when whole. A backup killed midway (kill -9, a full disk) leaves at most a `.partial` file that no one
takes for a backup, and the previous backup as it was; the manifest is the last member, so a file cut short has
none and is refused.

Reading extracts each member into a staging folder while hashing it: only regular files with plain relative names
(no absolute path, no `..`, no links or devices) are taken, each at most once.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from .manifest import NAME as MANIFEST_NAME, BackupRefused

SUFFIX = ".jarvis-backup"
PARTIAL = ".partial"
CHUNK = 1 << 20


class _Hashing(io.RawIOBase):
    """A file read through, hashed as it is read (tarfile reads each member once, CHUNK bytes at a time, and
    writes each piece before it reads the next); `pace` is called before each read after the first."""

    def __init__(self, f: BinaryIO, pace: Callable[[], None] | None = None):
        self.f, self.sha, self.pace, self.started = f, hashlib.sha256(), pace, False

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self.pace and self.started:
            self.pace()
        self.started = True
        data = self.f.read(n)
        self.sha.update(data)
        return data


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Writer:
    """Adds parts to the archive; `add_file` returns the part's size and sha256."""

    def __init__(self, tar: tarfile.TarFile, pace: Callable[[], None] | None = None):
        self.tar, self.pace = tar, pace

    def add_file(self, name: str, path: Path) -> dict:
        with open(path, "rb") as f:
            info = self.tar.gettarinfo(fileobj=f, arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            hashing = _Hashing(f, self.pace)
            self.tar.addfile(info, hashing)
        return {"name": name, "size": info.size, "sha256": hashing.sha.hexdigest()}

    def add_bytes(self, name: str, data: bytes) -> dict:
        """A small part from memory (the manifest, the secrets of an encrypted backup)."""
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o600
        info.mtime = int(time.time())
        self.tar.addfile(info, io.BytesIO(data))
        return {"name": name, "size": info.size, "sha256": hashlib.sha256(data).hexdigest()}


@contextmanager
def written(final: Path, wrap=None, pace: Callable[[], None] | None = None) -> Iterator[Writer]:
    """An archive that appears at `final` only when the block ends without error; `wrap(file)` may return a
    stream the archive is written through (the encryption), closed before the file is synced; `pace` is called
    between the pieces of each file copied in (`pacing.py`)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(f".{final.name}.{os.getpid()}{PARTIAL}")
    raw = open(partial, "wb")
    try:
        out = wrap(raw) if wrap else raw
        # A plain file is written in place (mode "w"); through the encryption, as a stream ("w|"). Large copy
        # buffers: tarfile's default of 16 KB makes a call per 16 KB of each database.
        mode = "w" if out is raw else "w|"
        with tarfile.open(fileobj=out, mode=mode, format=tarfile.PAX_FORMAT, bufsize=CHUNK,
                          copybufsize=CHUNK) as tar:
            yield Writer(tar, pace)
        if out is not raw:
            out.close()
        raw.flush()
        os.fsync(raw.fileno())
        raw.close()
        os.replace(partial, final)
        fsync_dir(final.parent)
    except BaseException:
        try:
            raw.close()  # on a full disk this fails too (its buffer cannot be written): the file goes all the same
        except OSError:
            pass
        partial.unlink(missing_ok=True)
        raise


def remove_stale_partials(folder: Path) -> list[Path]:
    """`.partial` files left in `folder` by backups whose process is gone (killed midway)."""
    from orchestrator.core.supervisor import pid_alive

    removed = []
    for path in folder.glob(f".*{PARTIAL}") if folder.is_dir() else []:
        pid = path.name[: -len(PARTIAL)].rsplit(".", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _safe_name(name: str) -> str:
    pure = PurePosixPath(name)
    if pure.is_absolute() or not pure.parts or any(p in ("", ".", "..") for p in pure.parts) or "\\" in name:
        raise BackupRefused(f"the backup names a file outside its folders ({name!r}): it was not made by Jarvis "
                            "or was tampered with")
    return pure.as_posix()


def extract(source: BinaryIO, staging: Path) -> tuple[bytes, dict[str, dict]]:
    """Every member of the archive read from `source` into `staging`; returns the manifest's bytes and, for each
    other member, its size and sha256 as read."""
    found: dict[str, dict] = {}
    manifest: bytes | None = None
    try:
        with tarfile.open(fileobj=source, mode="r|", bufsize=CHUNK) as tar:
            for member in tar:
                name = _safe_name(member.name)
                if not member.isfile():
                    raise BackupRefused(f"the backup holds {name!r}, which is not a plain file: it was not made "
                                        "by Jarvis or was tampered with")
                if name in found or (name == MANIFEST_NAME and manifest is not None):
                    raise BackupRefused(f"the backup holds {name!r} twice: it was tampered with")
                reader = tar.extractfile(member)
                assert reader is not None
                if name == MANIFEST_NAME:
                    manifest = reader.read(16 << 20)
                    continue
                dest = staging / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                sha = hashlib.sha256()
                size = 0
                with open(dest, "wb") as out:
                    while chunk := reader.read(CHUNK):
                        sha.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
                if size != member.size:
                    raise BackupRefused(f"the backup is truncated: {name} ends after {size} of its "
                                        f"{member.size} bytes")
                found[name] = {"size": size, "sha256": sha.hexdigest()}
    except (tarfile.TarError, EOFError) as exc:
        raise BackupRefused(f"the backup is truncated or is not a Jarvis backup ({exc})") from None
    if manifest is None:
        raise BackupRefused("the backup is truncated: it ends before its manifest (a backup cut short, or not "
                            "a Jarvis backup)")
    return manifest, found
