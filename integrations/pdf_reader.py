"""Reading PDFs page by page with pypdf, within a time and memory budget, with one clear sentence for every failure.

pypdf runs in a child process (pdf_child.py: one per read, started ahead of time so that a read does not wait
for Python and pypdf to load) whose pages are relayed over a small queue: the caller gets pages as they are read (memory stays flat however long the file), and a file that
makes pypdf spin (a crafted page whose content takes minutes to parse) costs at most the time budget: the
caller stops waiting, the child is killed wherever it is, inside a page too, and the answer says which pages
were read, which page it stopped in and which pages to ask for instead. The child's address space is capped
(`memory_mb`, plus the file's size), and it gets none of Jarvis's environment.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import ToolError
from .pdf_child import MAX_LINE_BYTES


_CHILD = Path(__file__).with_name("pdf_child.py")
_SNIFF_BYTES = 1024
_QUEUE_PAGES = 4
MEMORY_MB = 1024  # the child's address space, beyond the (memory-mapped) file


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
    cut_pages: list[int] = field(default_factory=list)  # text longer than pdf_child.MAX_PAGE_CHARS, cut there


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
    (gigabytes, built outside any time budget) before the check."""
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


def _failure(kind: str, detail: str, shown: str, memory_mb: int) -> str:
    """The child's error kind (pdf_child.py) as one sentence."""
    sentences = {
        "empty": f"{shown} is empty, so there is no PDF to read.",
        "needs_password": f"{shown} is password-protected: ask the user for its password and call again with password=...",
        "wrong_password": f"The password given for {shown} is wrong; ask the user for the right one.",
        "dependency": f"{shown} uses encryption that needs the 'cryptography' package: install it (pip install cryptography).",
        "unsupported_encryption": f"{shown} uses an encryption method pypdf cannot open ({detail}).",
        "unreadable": f"{shown} cannot be opened: {detail}.",
        "memory": (f"Opening {shown} needs more than {memory_mb} MB of memory, so it was stopped (the file may be "
                   "crafted or damaged); ask for an intact copy."),
    }
    return sentences.get(kind, f"{shown} is damaged and cannot be read as a PDF ({detail or kind}); ask for an intact copy.")


def _child_environment() -> dict[str, str]:
    """Nothing of Jarvis's environment (keys, tokens) reaches the process that parses an outside file."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C.UTF-8"}


_spare_lock = threading.Lock()
_spare: list[tuple[int, subprocess.Popen[bytes]]] = []  # (the pid that started it, the child)


def _new_child() -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen([sys.executable, "-I", str(_CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, close_fds=True, env=_child_environment())
    except OSError as exc:
        raise ToolError(f"The PDF reader could not be started ({exc.strerror or exc}).") from None


def _take_child() -> subprocess.Popen[bytes]:
    """The spare child (pypdf imported, waiting for its file on stdin), else a new one.

    Starting Python and importing pypdf takes 0.15-0.3 s of CPU; a spare started when the previous read ended
    (`_keep_spare`, while the model reads what it got) makes a read cost a few ms. Each child reads one file and
    is killed; the spare (one a process: the process's own shared state, like a database engine) ends when this
    process ends (its stdin closes) or at exit."""
    with _spare_lock:
        taken = _spare.pop() if _spare else None
    if taken is not None and taken[0] == os.getpid() and taken[1].poll() is None:
        return taken[1]
    if taken is not None and taken[0] == os.getpid():
        taken[1].wait()  # a spare that died (killed from outside): reaped, and a new child started
    return _new_child()  # (a spare of the process this one was forked from is that process's own)


def _keep_spare() -> None:
    """A spare child started after a read, not beside it: on two cores its import would slow the read down."""
    with _spare_lock:
        if _spare and _spare[-1][0] == os.getpid():
            return
        try:
            _spare[:] = [(os.getpid(), _new_child())]
        except ToolError:
            pass  # the next read starts its own, and says so if it cannot


@atexit.register
def _end_spare() -> None:
    with _spare_lock:
        for pid, proc in _spare:
            if pid == os.getpid() and proc.poll() is None:
                proc.kill()
                proc.wait()
        _spare.clear()


class PdfPages:
    """`with PdfPages(path, shown, password, pages, budget) as doc:` then `doc.info`, and `for n, text in doc:`.

    pypdf runs in a child process (pdf_child.py) that is killed when the budget is spent, inside a page too; a
    thread of this process relays its JSON lines over a small queue, so pages come as they are read and the
    child waits (on its pipe) while the caller is busy with them."""

    def __init__(self, path: Path, shown: str, *, password: str | None = None, pages: str | list[int] | None = None,
                 budget_s: float = 120.0, memory_mb: int = MEMORY_MB):
        self.path = path
        self.shown = shown
        self.password = password
        self.pages_spec = pages
        self.budget_s = budget_s
        self.memory_mb = memory_mb
        self.stats = ReadStats()
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=_QUEUE_PAGES)
        self._stop = threading.Event()
        self._waited = 0.0
        self._info: PdfInfo | None = None
        self._handed = 0  # selected pages handed to the caller (read or failed)
        self._proc: subprocess.Popen[bytes] | None = None
        self._relay: threading.Thread | None = None

    # -- the child and its relay -------------------------------------------------------------------
    def _start(self) -> None:
        self._proc = _take_child()
        request = {"path": str(self.path), "password": self.password, "memory_mb": self.memory_mb}
        self._tell(request)
        self._relay = threading.Thread(target=self._relay_lines, args=(self._proc,), name=f"pdf-{self.path.name}",
                                       daemon=True)
        self._relay.start()

    def _tell(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:  # the child is gone: its relay says how
            pass

    def _put(self, item: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _relay_lines(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            while not self._stop.is_set():
                line = proc.stdout.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                if not line.endswith(b"\n"):
                    self._put(("error", ToolError(f"The PDF reader sent more than {MAX_LINE_BYTES // 1_000_000} MB "
                                                  f"for one page of {self.shown}, so it was stopped.")))
                    return
                message = json.loads(line)
                item = _item(message)
                if not self._put(item) or item[0] in ("end", "failed", "memory"):
                    return
        except (OSError, ValueError):  # the pipe closed under us, or a line that is not JSON: the child is gone
            pass
        if not self._stop.is_set():
            self._put(("died", proc.wait()))

    def _kill(self) -> None:
        self._stop.set()
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if self._relay is not None:
            self._relay.join(timeout=5)
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        self._proc = None
        _keep_spare()

    # -- the caller's side -------------------------------------------------------------------------
    def _get(self) -> tuple[str, Any]:
        remaining = self.budget_s - self._waited
        started = time.monotonic()
        try:
            if remaining <= 0:  # spent: stop now, however quickly the next page would come
                raise queue.Empty
            item = self._queue.get(timeout=remaining)
        except queue.Empty:
            self._kill()
            raise ToolError(self._stopped(f"took longer than {self.budget_s:g} s")) from None
        finally:
            self._waited += time.monotonic() - started
        kind, value = item
        if kind in ("error", "failed", "memory", "died"):
            self._kill()
        if kind == "error":
            raise value
        if kind == "failed":
            raise ToolError(_failure(*value, self.shown, self.memory_mb))
        if kind == "memory":
            raise ToolError(self._stopped(f"needed more than {self.memory_mb} MB of memory"))
        if kind == "died":
            raise ToolError(self._stopped(f"failed (the reader process ended with code {value})"))
        return item

    def _stopped(self, why: str) -> str:
        """What was read, the page the reading stopped in, and what to ask for next: one sentence."""
        if self._info is None:
            return (f"Reading {self.shown} {why}, so it was stopped while opening the file, before any page was "
                    "read (the file may be damaged, crafted or very large); ask for an intact or smaller copy.")
        selected = self._info.selected
        stuck = selected[self._handed] if self._handed < len(selected) else selected[-1]
        done, rest = selected[: self._handed], selected[self._handed + 1:]
        read = ((f"page {done[0]} was read" if len(done) == 1 else f"pages {_ranges(done)} were read") if done
                else "no page was read before it")
        if rest:
            todo = f"call again with pages='{_ranges(rest)}' to skip that page"
            if done:
                todo += f", or pages='{_ranges(done)}' for what was read"
        elif done:
            todo = f"call again with pages='{_ranges(done)}' for what was read"
        else:
            todo = "that page cannot be read within the limits (it may be crafted to be slow)"
        return f"Reading {self.shown} {why}, so it was stopped inside page {stuck} ({read}); {todo}."

    def __enter__(self) -> "PdfPages":
        try:
            self._start()
            kind, value = self._get()
            if kind != "info":  # cannot happen before info, but be safe
                raise ToolError(f"{self.shown} has no pages.")
            if value["count"] == 0:
                raise ToolError(f"{self.shown} has no pages.")
            selected = parse_pages(self.pages_spec, value["count"], self.shown)
        except BaseException:
            self._kill()
            raise
        self._info = PdfInfo(self.path, value["count"], value["title"], value["encrypted"], selected)
        self._tell({"pages": _spans(selected)})
        return self

    def __exit__(self, *exc: Any) -> None:
        self._kill()

    @property
    def info(self) -> PdfInfo:
        assert self._info is not None
        return self._info

    def __iter__(self) -> Iterator[tuple[int, str]]:
        while True:
            kind, value = self._get()
            if kind == "end":
                return
            self._handed += 1
            if kind == "bad_page":
                self.stats.failed_pages.append(value)
                continue
            number, text, cut = value
            self.stats.pages_read += 1
            if cut:
                self.stats.cut_pages.append(number)
            if not text.strip():
                self.stats.empty_pages.append(number)
            yield number, text


def _item(message: dict[str, Any]) -> tuple[str, Any]:
    """A line of the child (data only) -> a queue item."""
    if "info" in message:
        info = message["info"]
        return "info", {"count": int(info["count"]), "title": info.get("title"), "encrypted": bool(info["encrypted"])}
    if "page" in message:
        return "page", (int(message["page"]), str(message["text"]), bool(message.get("cut")))
    if "bad_page" in message:
        return "bad_page", int(message["bad_page"])
    if "memory" in message:
        return "memory", int(message["memory"])
    if "error" in message:
        return "failed", (str(message["error"]), str(message.get("detail") or ""))
    return "end", None


def _spans(numbers: list[int]) -> list[list[int]]:
    spans: list[list[int]] = []
    for n in numbers:
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return spans


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
