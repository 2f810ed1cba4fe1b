"""The child process that runs pypdf for `pdf_reader.PdfPages`: killed at the read's deadline, even inside a page.

A Python thread cannot be stopped, so a page whose content stream takes pypdf minutes (a crafted PDF mailed to
the user) kept a core busy long after the tool had answered. Here pypdf runs in its own process, which the
reader kills when the budget ends. It is started as a script (`python -I pdf_child.py`), imports only the
standard library and pypdf, and imports pypdf before it reads its request: the reader starts the next child
ahead of time, so a read does not wait for it. Its address space is capped with
RLIMIT_AS (where the system enforces it) at the reader's memory limit plus the file's size (the file is
memory-mapped).

The protocol is JSON lines, data only (never pickled objects):
  stdin, first line:  {"path": ..., "password": ... or null, "memory_mb": N}  (the password never on the command line)
  stdout:             {"info": {"count": N, "title": ..., "encrypted": bool}} or {"error": KIND, "detail": ...}
  stdin, second line: {"pages": [[first, last], ...]}  (the pages the reader selected, 1-based, inclusive)
  stdout, per page:   {"page": N, "text": ..., "cut": bool} | {"bad_page": N} | {"memory": N}, then {"end": true}
A page's text is cut at MAX_PAGE_CHARS, so no line is longer than MAX_LINE_BYTES (the reader refuses longer).
"""

from __future__ import annotations

import json
import mmap
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

MAX_PAGE_CHARS = 500_000  # a real page holds a few thousand characters
MAX_TITLE_CHARS = 500
MAX_LINE_BYTES = MAX_PAGE_CHARS * 12 + 4096  # JSON's \uXXXX\uXXXX for a character outside the BMP is 12 bytes
_FORGET_EVERY = 64  # pages between two clearings of pypdf's object cache


def _send(out: BinaryIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode("ascii") + b"\n")
    out.flush()


def _limit_memory(memory_mb: int, file_size: int) -> None:
    try:
        import resource

        limit = memory_mb * 1024 * 1024 + file_size
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not enforced everywhere (macOS): the deadline still holds
        pass


def _error_kind(exc: BaseException) -> str:
    from pypdf.errors import DependencyError, EmptyFileError, FileNotDecryptedError

    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, EmptyFileError):
        return "empty"
    if isinstance(exc, FileNotDecryptedError):
        return "needs_password"
    if isinstance(exc, DependencyError):
        return "dependency"
    return "damaged"


def _detail(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:120] if text else type(exc).__name__


def _decrypt(reader: Any, password: str | None) -> str | None:
    """None when the document is open, else the error kind."""
    if not password:
        return None if reader.decrypt("") else "needs_password"  # only an owner password: anyone may read it
    return None if reader.decrypt(password) else "wrong_password"


def _forget_parsed_objects(reader: Any) -> None:
    """pypdf keeps every object it has parsed (decoded page contents included) for the reader's lifetime:
    ~20 KB a page. Pages already read will not be read again, so the cache is dropped now and then (shared
    objects such as fonts are parsed again when the next page needs them); memory stays flat in page count."""
    cache = getattr(reader, "resolved_objects", None)
    if isinstance(cache, dict):
        cache.clear()


@contextmanager
def _mapped(fh: Any) -> Iterator[Any]:
    """The file memory-mapped: read at memory speed like pypdf's own in-memory copy, without copying it (a
    scanned PDF can be hundreds of MB); the OS pages it in and out. A plain file handle where mmap fails."""
    try:
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        yield fh
        return
    try:
        yield data
    finally:
        data.close()


def _title(reader: Any) -> str | None:
    try:
        meta = reader.metadata
        title = (meta.title if meta else None) or None
        return str(title).strip()[:MAX_TITLE_CHARS] or None if title else None
    except Exception:  # noqa: BLE001 - metadata is optional and often broken
        return None


def _pages(ranges: list[list[int]]) -> Iterator[int]:
    for first, last in ranges:
        yield from range(int(first), int(last) + 1)


def _read(request: dict[str, Any], commands: BinaryIO, out: BinaryIO) -> None:
    import warnings

    from pypdf import PdfReader

    with open(request["path"], "rb") as fh, _mapped(fh) as data, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            reader = PdfReader(data)
            encrypted = bool(reader.is_encrypted)
            try:
                failed = _decrypt(reader, request.get("password")) if encrypted else None
            except NotImplementedError as exc:
                failed = "unsupported_encryption: " + _detail(exc)
            if failed:
                kind, _, detail = failed.partition(": ")
                _send(out, {"error": kind, "detail": detail})
                return
            info = {"count": len(reader.pages), "title": _title(reader), "encrypted": encrypted}
        except Exception as exc:  # noqa: BLE001 - every pypdf failure becomes one kind, said in one sentence by the reader
            _send(out, {"error": _error_kind(exc), "detail": _detail(exc)})
            return
        _send(out, {"info": info})
        line = commands.readline(1 << 20)
        if not line:
            return  # the reader refused the page selection
        for i, number in enumerate(_pages(json.loads(line)["pages"]), 1):
            if i % _FORGET_EVERY == 0:
                _forget_parsed_objects(reader)
            try:
                text = reader.pages[number - 1].extract_text() or ""
            except MemoryError:
                _forget_parsed_objects(reader)
                _send(out, {"memory": number})
                return
            except Exception:  # noqa: BLE001 - one bad page does not sink the document
                _send(out, {"bad_page": number})
                continue
            _send(out, {"page": number, "text": text[:MAX_PAGE_CHARS], "cut": len(text) > MAX_PAGE_CHARS})
    _send(out, {"end": True})


def main() -> None:
    import pypdf  # noqa: F401 - loaded before the request comes: the reader starts this child ahead of its read

    commands, out = sys.stdin.buffer, sys.stdout.buffer
    line = commands.readline(1 << 20)
    if not line:
        return  # a spare child whose process ended
    request = json.loads(line)
    try:
        import os

        size = os.path.getsize(request["path"])
    except OSError:
        size = 0
    _limit_memory(int(request["memory_mb"]), size)
    try:
        _read(request, commands, out)
    except MemoryError:
        _send(out, {"error": "memory", "detail": ""})
    except OSError as exc:
        _send(out, {"error": "unreadable", "detail": exc.strerror or str(exc)})
    except Exception as exc:  # noqa: BLE001
        _send(out, {"error": _error_kind(exc), "detail": _detail(exc)})


if __name__ == "__main__":
    main()
