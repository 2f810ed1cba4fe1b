"""A full disk, recognized in whatever error the storage layer raised, and what to tell the user.

SQLite says "database or disk is full" (SQLITE_FULL), the OS says ENOSPC (or EDQUOT for a quota), PostgreSQL
says SQLSTATE 53100 (disk_full); SQLAlchemy and LangGraph wrap them. SQLite can also answer a full disk with a
plain "disk I/O error" (growing its WAL index fails), so an I/O error counts when a folder Jarvis keeps
databases in (storage.py registers each one) has no space left. Every write of Jarvis is a transaction, so a
write that failed this way left the previous state whole: the user frees space and tries again.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
SQLITE_FULL = 13
SQLITE_IOERR = 10
PG_DISK_FULL = "53100"
LOW_SPACE_BYTES = 64 * 1024  # less than this free: nothing SQLite writes fits
HOW_TO_FREE = ("Free some space on that disk (`jarvis threads prune --vacuum` also frees old checkpoints) and "
               "try again.")

_data_folders: set[Path] = set()


def watch(folder: Path) -> None:
    """A folder Jarvis keeps a database in: an I/O error while it has no space left is a full disk."""
    _data_folders.add(Path(folder))


def _out_of_space() -> bool:
    for folder in list(_data_folders):
        try:
            st = os.statvfs(folder)
        except OSError:
            continue
        if st.f_bavail * st.f_frsize < LOW_SPACE_BYTES:
            return True
    return False


def is_disk_full(exc: BaseException | None) -> bool:
    """True when exc, or an error it wraps, says the disk (or the database's quota) is full."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            return True
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)
            if code == SQLITE_FULL or "database or disk is full" in str(exc):
                return True
            if ((code is not None and code & 0xFF == SQLITE_IOERR) or "disk I/O error" in str(exc)) and _out_of_space():
                return True
        if isinstance(exc, OSError) and exc.errno == errno.EIO and _out_of_space():
            return True
        if getattr(exc, "sqlstate", None) == PG_DISK_FULL or getattr(exc, "pgcode", None) == PG_DISK_FULL:
            return True
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
    return False


def disk_full_message(what_failed: str) -> str:
    """For the user: what failed, that nothing saved before is lost, what to do."""
    return f"The disk holding Jarvis's data is full: {what_failed}. Nothing saved before is lost. {HOW_TO_FREE}"
