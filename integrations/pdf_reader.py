"""Reading PDFs page by page with pypdf, within a time budget, with one clear sentence for every failure.

pypdf runs in a worker thread that hands pages over a small queue: the caller gets pages as they are read
(memory stays flat however long the file), and a file that makes pypdf spin (a malformed page) costs at most
the time budget: the caller stops waiting and says so, and the worker is told to stop at the next page.
"""

from __future__ import annotations

import hashlib
import mmap
import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import ToolError

log = logging.getLogger(__name__)

_SNIFF_BYTES = 1024
_QUEUE_PAGES = 4
_FORGET_EVERY = 64  # pages between two clearings of pypdf's object cache


@dataclass
class PdfInfo:
    path: Path
    page_count: int
    title: str | None
    encrypted: bool
    selected: list[int]  # 1-based page numbers that will be read


@dataclass
class ReadStats:
    pages_read: int = 0
    empty_pages: list[int] = field(default_factory=list)
    failed_pages: list[int] = field(default_factory=list)


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def check_is_pdf(path: Path, shown: str) -> None:
    if path.is_dir():
        raise ToolError(f"{shown} is a folder, not a PDF file.")
    try:
        with path.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        raise ToolError(f"{shown} cannot be opened: {exc.strerror or exc}.") from None
    if not head:
        raise ToolError(f"{shown} is empty (0 bytes), so there is no PDF to read.")
    if b"%PDF-" not in head:
        kind = _guess_kind(head)
        raise ToolError(f"{shown} is not a PDF{kind}; give the path of a .pdf file.")


def _guess_kind(head: bytes) -> str:
    signatures = {
        b"PK\x03\x04": "a ZIP or Office document",
        b"\x89PNG": "a PNG image",
        b"\xff\xd8\xff": "a JPEG image",
        b"GIF8": "a GIF image",
        b"<!DOCTYPE html": "an HTML page",
        b"<html": "an HTML page",
        b"{\\rtf": "an RTF document",
    }
    for sig, name in signatures.items():
        if head.lstrip().lower().startswith(sig.lower()):
            return f" (it looks like {name})"
    try:
        head.decode("utf-8")
        return " (it looks like plain text; read it with fs_read_text)"
    except UnicodeDecodeError:
        return " (it does not start with a PDF header)"


def parse_pages(spec: str | list[int] | None, count: int, shown: str) -> list[int]:
    """'1-3,7' / [1, 2] / None (all) -> sorted 1-based page numbers, checked against the page count.

    A range's ends are checked before it is expanded: '1-999999999' would otherwise be a set of a billion numbers
    built in the reader's thread (gigabytes, and the thread is not stopped by the time budget) before the check."""
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        return list(range(1, count + 1))
    wanted: set[int] = set()
    if isinstance(spec, list):
        wanted = {int(p) for p in spec}
    else:
        for part in spec.replace(" ", "").split(","):
            if not part:
                continue
            try:
                if "-" in part:
                    lo_s, hi_s = part.split("-", 1)
                    lo = int(lo_s) if lo_s else 1
                    hi = int(hi_s) if hi_s else count
                    _check_in_range((lo, hi), count, shown)
                    if lo > hi:
                        raise ToolError(f"pages={spec!r}: the range {part!r} runs backwards; write it low-high, "
                                        f"like '{hi}-{lo}'.")
                    wanted.update(range(lo, hi + 1))
                else:
                    wanted.add(int(part))
            except ValueError:
                raise ToolError(f"pages={spec!r} is not a page list: use numbers and ranges like '1-3,7'.") from None
    _check_in_range(wanted, count, shown)
    if not wanted:
        raise ToolError(f"pages={spec!r} selects no page.")
    return sorted(wanted)


def _check_in_range(pages: Iterable[int], count: int, shown: str) -> None:
    bad = sorted(p for p in pages if p < 1 or p > count)
    if bad:
        raise ToolError(f"Page {bad[0]} is out of range: {shown} has {count} page{'s' if count != 1 else ''}.")


def _describe_read_error(exc: BaseException, shown: str) -> str:
    from pypdf.errors import DependencyError, EmptyFileError, FileNotDecryptedError

    if isinstance(exc, EmptyFileError):
        return f"{shown} is empty, so there is no PDF to read."
    if isinstance(exc, FileNotDecryptedError):
        return f"{shown} is password-protected: ask the user for its password and call again with password=..."
    if isinstance(exc, DependencyError):
        return f"{shown} uses encryption that needs the 'cryptography' package: install it (pip install cryptography)."
    detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
    return f"{shown} is damaged and cannot be read as a PDF ({detail}); ask for an intact copy."


class PdfPages:
    """`with PdfPages(path, shown, password, pages, budget) as doc:` then `doc.info`, and `for n, text in doc:`."""

    def __init__(self, path: Path, shown: str, *, password: str | None = None, pages: str | list[int] | None = None,
                 budget_s: float = 120.0):
        self.path = path
        self.shown = shown
        self.password = password
        self.pages_spec = pages
        self.budget_s = budget_s
        self.stats = ReadStats()
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=_QUEUE_PAGES)
        self._stop = threading.Event()
        self._waited = 0.0
        self._info: PdfInfo | None = None
        self._thread: threading.Thread | None = None

    # -- the worker ------------------------------------------------------------------------------
    def _put(self, item: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _work(self) -> None:
        try:
            import warnings

            from pypdf import PdfReader

            with self.path.open("rb") as fh, _mapped(fh) as data, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    reader = PdfReader(data)
                    encrypted = reader.is_encrypted
                    if encrypted:
                        self._decrypt(reader)
                    count = len(reader.pages)
                except ToolError:
                    raise
                except Exception as exc:  # noqa: BLE001 - every pypdf failure becomes one sentence
                    raise ToolError(_describe_read_error(exc, self.shown)) from None
                if count == 0:
                    raise ToolError(f"{self.shown} has no pages.")
                selected = parse_pages(self.pages_spec, count, self.shown)
                if not self._put(("info", PdfInfo(self.path, count, _title(reader), encrypted, selected))):
                    return
                for i, number in enumerate(selected, 1):
                    if self._stop.is_set():
                        return
                    if i % _FORGET_EVERY == 0:
                        _forget_parsed_objects(reader)
                    try:
                        text = reader.pages[number - 1].extract_text() or ""
                        item: tuple[str, Any] = ("page", (number, text))
                    except Exception as exc:  # noqa: BLE001 - one bad page does not sink the document
                        log.debug("page %s of %s failed: %s", number, self.path, exc)
                        item = ("bad_page", number)
                    if not self._put(item):
                        return
            self._put(("end", None))
        except ToolError as exc:
            self._put(("error", exc))
        except Exception as exc:  # noqa: BLE001
            self._put(("error", ToolError(_describe_read_error(exc, self.shown))))

    def _decrypt(self, reader: Any) -> None:
        from pypdf.errors import DependencyError

        try:
            if not self.password:
                if reader.decrypt(""):
                    return  # only an owner password: readable by anyone
                raise ToolError(
                    f"{self.shown} is password-protected: ask the user for its password and call again with password=..."
                )
            if not reader.decrypt(self.password):
                raise ToolError(f"The password given for {self.shown} is wrong; ask the user for the right one.")
        except DependencyError:
            raise ToolError(_describe_read_error(DependencyError(), self.shown)) from None
        except ToolError:
            raise
        except NotImplementedError as exc:
            raise ToolError(f"{self.shown} uses an encryption method pypdf cannot open ({exc}).") from None

    # -- the caller's side -------------------------------------------------------------------------
    def _get(self) -> tuple[str, Any]:
        remaining = self.budget_s - self._waited
        started = time.monotonic()
        try:
            if remaining <= 0:  # spent: stop now, however quickly the next page would come
                raise queue.Empty
            item = self._queue.get(timeout=remaining)
        except queue.Empty:
            self._stop.set()
            raise ToolError(
                f"Reading {self.shown} took longer than {self.budget_s:g} s, so it was stopped (the file may be damaged "
                "or very large); try a smaller page range with pages=..."
            ) from None
        finally:
            self._waited += time.monotonic() - started
        if item[0] == "error":
            self._stop.set()
            raise item[1]
        return item

    def __enter__(self) -> "PdfPages":
        self._thread = threading.Thread(target=self._work, name=f"pdf-{self.path.name}", daemon=True)
        self._thread.start()
        kind, value = self._get()
        if kind == "end":  # cannot happen before info, but be safe
            raise ToolError(f"{self.shown} has no pages.")
        self._info = value
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()

    @property
    def info(self) -> PdfInfo:
        assert self._info is not None
        return self._info

    def __iter__(self) -> Iterator[tuple[int, str]]:
        while True:
            kind, value = self._get()
            if kind == "end":
                return
            if kind == "bad_page":
                self.stats.failed_pages.append(value)
                continue
            number, text = value
            self.stats.pages_read += 1
            if not text.strip():
                self.stats.empty_pages.append(number)
            yield number, text


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
        return str(title).strip() or None if title else None
    except Exception:  # noqa: BLE001 - metadata is optional and often broken
        return None


def no_text_message(shown: str, info: PdfInfo, stats: ReadStats) -> str:
    if stats.failed_pages and not stats.empty_pages:
        return f"{shown} is damaged: none of its pages could be read; ask for an intact copy."
    which = "its pages have" if len(info.selected) == info.page_count else f"pages {_ranges(info.selected)} have"
    return (f"{shown} has no text layer ({which} no extractable text; it is probably scanned images): "
            "run OCR on it first (for example `ocrmypdf in.pdf out.pdf`) and try again.")


def _ranges(numbers: list[int]) -> str:
    out: list[str] = []
    start = prev = None
    for n in numbers:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(out)
