"""Files the user adds to the index (`jarvis docs add`): PDFs, text and Markdown, folders recursively; and
`sync`, which re-indexes changed files and drops deleted ones."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from integrations.base import ToolError
from integrations.documents import ReadDocument, Segment
from integrations.pdf_reader import PdfPages, check_is_pdf, no_text_message, sha256_file

from .store import AddResult, DocsIndex

log = logging.getLogger(__name__)

TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".rst", ".text"}
PDF_SUFFIXES = {".pdf"}
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".cache"}
MAX_TEXT_BYTES = 20_000_000

# progress(event, path, detail): event is "start" (detail: pages or None), "page" (detail: pages done),
# "done" (detail: AddResult), "skip" (detail: reason)
Progress = Callable[[str, Path, object], None]


@dataclass
class AddReport:
    added: list[Path] = field(default_factory=list)
    updated: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    pages: int = 0

    def count(self, path: Path, result: AddResult, pages: int) -> None:
        getattr(self, result.status).append(path)
        self.pages += pages


def wanted_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The indexable files under the given paths (folders recursively), each once, in a stable order."""
    seen: set[Path] = set()
    for raw in paths:
        path = Path(os.path.expanduser(str(raw))).resolve()
        if path.is_dir():
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
                for name in sorted(filenames):
                    f = Path(dirpath) / name
                    if f.suffix.lower() in TEXT_SUFFIXES | PDF_SUFFIXES and f not in seen and not f.is_symlink():
                        seen.add(f)
                        yield f
        elif path not in seen:
            seen.add(path)
            yield path


def read_pdf(path: Path, budget_s: float, on_page: Callable[[int, int], None] | None = None,
             password: str | None = None) -> ReadDocument:
    check_is_pdf(path, path.name)
    digest = sha256_file(path)
    segments: list[Segment] = []
    with PdfPages(path, path.name, password=password, budget_s=budget_s) as doc:
        info = doc.info
        for number, text in doc:
            segments.append(Segment(text=text, page=number))
            if on_page:
                on_page(doc.stats.pages_read, info.page_count)
        stats = doc.stats
    if not any(s.text.strip() for s in segments):
        raise ToolError(no_text_message(path.name, info, stats))
    return ReadDocument(kind="pdf", source=str(path), title=info.title or path.name, content_hash=digest,
                        source_tool="jarvis docs add", segments=segments)


def _check_text_size(path: Path) -> None:
    size = path.stat().st_size
    if size > MAX_TEXT_BYTES:
        raise ToolError(f"{path.name} is {size // 1_000_000} MB, too large for the index (at most "
                        f"{MAX_TEXT_BYTES // 1_000_000} MB of text).")


def read_text(path: Path) -> ReadDocument:
    _check_text_size(path)
    with path.open("rb") as fh:
        data = fh.read(MAX_TEXT_BYTES + 1)  # the file may have grown since it was measured
    if len(data) > MAX_TEXT_BYTES:
        raise ToolError(f"{path.name} grew past {MAX_TEXT_BYTES // 1_000_000} MB while it was read.")
    if b"\x00" in data[:4096]:
        raise ToolError(f"{path.name} is a binary file, not text.")
    text = data.decode("utf-8", errors="replace")
    title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.strip()), path.name)[:200]
    return ReadDocument(kind="text", source=str(path), title=title, content_hash=hashlib.sha256(data).hexdigest(),
                        source_tool="jarvis docs add", segments=[Segment(text=text)])


def index_file(index: DocsIndex, path: Path, progress: Progress | None = None) -> tuple[AddResult, int]:
    """Index one file unless its content is unchanged (checked by hash before reading it). Returns the result
    and the pages read (0 when skipped)."""
    if not path.exists():
        raise ToolError(f"{path} does not exist.")
    suffix = path.suffix.lower()
    if suffix not in PDF_SUFFIXES | TEXT_SUFFIXES:
        raise ToolError(f"{path.name} is not a PDF, text or Markdown file.")
    if suffix not in PDF_SUFFIXES:
        _check_text_size(path)  # before hashing: the whole file was read into memory to hash it, however large
    digest = sha256_file(path)  # streamed
    current = index.get(str(path))
    if current is not None and current.content_hash == digest:
        return _unchanged(current), 0
    if suffix in PDF_SUFFIXES:
        if progress:
            progress("start", path, None)
        doc = read_pdf(path, index.settings.pdf.time_budget_s,
                       (lambda done, total: progress("page", path, (done, total))) if progress else None)
    else:
        doc = read_text(path)
    return index.add(doc), len(doc.segments) if doc.kind == "pdf" else 1


def _unchanged(doc) -> AddResult:
    return AddResult(doc.id, "unchanged", doc.chunk_count, 0, 0)


def add_paths(index: DocsIndex, paths: Iterable[Path], progress: Progress | None = None) -> AddReport:
    report = AddReport()
    for path in wanted_files(paths):
        try:
            result, pages = index_file(index, path, progress)
            report.count(path, result, pages)
            if progress:
                progress("done", path, result)
        except ToolError as exc:
            report.failed.append((path, str(exc)))
            if progress:
                progress("skip", path, str(exc))
        except OSError as exc:
            report.failed.append((path, f"cannot read it: {exc.strerror or exc}"))
            if progress:
                progress("skip", path, str(exc))
    return report


def sync(index: DocsIndex, progress: Progress | None = None) -> AddReport:
    """Every indexed file: dropped if deleted, re-indexed if changed; then vectors for chunks without one."""
    report = AddReport()
    for doc in index.documents():
        if "://" in doc.source:  # transcripts and other URLs have no file to compare with
            continue
        path = Path(doc.source)
        if not path.exists():
            index.remove(doc.id)
            report.removed.append(doc.source)
            if progress:
                progress("removed", path, None)
            continue
        try:
            result, pages = index_file(index, path, progress)
            report.count(path, result, pages)
            if progress:
                progress("done", path, result)
        except (ToolError, OSError) as exc:
            report.failed.append((path, str(exc)))
            if progress:
                progress("skip", path, str(exc))
    index.fill_missing_vectors()
    return report
