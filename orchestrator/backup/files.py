"""The files a backup holds besides the databases: the data folder's other files (uploads, pins...), the
generated tools (`tools_dir`), the MCP server files (`mcp.dir`) and the settings file, each under a prefix of its
own in the archive so a restore puts it where the new machine's settings say.

Left out: SQLite databases and their WAL/journal files (copied by `sqlite_parts.py`, never as files), the web
UI's session token (a secret a restored Jarvis makes anew), logs, and backups themselves (an unfinished one, or a
backup folder kept inside the data folder).
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

from orchestrator.core.config import Settings

from .sqlite_parts import find_databases, is_side_file

DATA, TOOLS, MCP, SETTINGS, DB = "data", "tools", "mcp", "settings", "db"
# server/security.py's TOKEN_FILE: a secret, made anew at the next start; the address of the `jarvis run` serving
# now (core/server_identity.py), stale once restored; the lock of the backup being made.
SKIPPED_NAMES = {"server_token", "server_url", "backup.lock"}
SKIPPED_PATTERNS = ("*.partial", "model-server-*.log", "embedded-*.log")  # unfinished files; model servers' logs
SKIPPED_DIRS = {"__pycache__"}


def folders(settings: Settings) -> dict[str, Path]:
    """Each archive prefix and the folder of these settings it stands for."""
    return {DATA: Path(settings.data_dir), TOOLS: Path(settings.tools_dir), MCP: Path(settings.mcp.dir)}


def _walk(folder: Path, skip: set[Path]) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        if path.is_symlink() or path.resolve() in skip or path.name in SKIPPED_DIRS:
            continue
        if path.is_dir():
            yield from _walk(path, skip)
        elif path.is_file() and path.name not in SKIPPED_NAMES and not any(fnmatch(path.name, p)
                                                                           for p in SKIPPED_PATTERNS):
            yield path


def plain_files(settings: Settings, *, skip: set[Path]) -> Iterator[tuple[str, Path]]:
    """(archive name, file) of every file the backup copies as it is; `skip`: folders left out (the backup's)."""
    databases = set(find_databases(Path(settings.data_dir)))
    seen: set[Path] = set()
    for prefix, folder in folders(settings).items():
        for path in _walk(folder, {s.resolve() for s in skip}):
            # A folder inside another (tools_dir under the data folder) is copied once, under its own prefix.
            nested = any(other != folder and _inside(path, other) and _inside(other, folder)
                         for other in folders(settings).values())
            if path in databases or is_side_file(path) or path in seen or nested:
                continue
            seen.add(path)
            yield f"{prefix}/{path.relative_to(folder).as_posix()}", path
    if settings.source_path is not None and Path(settings.source_path).is_file():
        yield f"{SETTINGS}/{Path(settings.source_path).name}", Path(settings.source_path)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def destination(settings: Settings, name: str) -> Path | None:
    """Where the archive member `name` goes on this machine (None: the settings file, shown not written over)."""
    prefix, _, rest = name.partition("/")
    if prefix == DB:
        return Path(settings.data_dir) / rest
    base = folders(settings).get(prefix)
    return None if base is None else base / rest
