"""A file only its user may read (a token, session cookies), written whole: a temporary file beside it, renamed
over it. The temporary file is never opened through a symbolic link, so a link planted under its name cannot make
the write land elsewhere, and a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)  # O_CREAT's mode does not change a file that was already there
    os.replace(tmp, path)
