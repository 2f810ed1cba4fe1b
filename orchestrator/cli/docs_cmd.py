"""`jarvis docs add|list|remove|sync|search`: the document index (data/docs_index.sqlite)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from orchestrator.cli import fail, say, state

docs_app = typer.Typer(help="The document index: files you add and what Jarvis has read, searchable later.",
                       no_args_is_help=True)


class _Progress:
    """Progress on stderr: a line per file, and page counts for long PDFs (redrawn in place on a terminal)."""

    def __init__(self, total: int | None = None, show_unchanged: bool = True):
        self.total = total
        self.show_unchanged = show_unchanged
        self.done = 0
        self.tty = sys.stderr.isatty()
        self._last_page_report = 0

    def __call__(self, event: str, path: Path, detail: object) -> None:
        prefix = f"[{self.done + 1}/{self.total}] " if self.total else ""
        if event == "start":
            self._last_page_report = 0
        elif event == "page":
            done, total = detail  # type: ignore[misc]
            if total >= 50 and (self.tty or done - self._last_page_report >= 100 or done == total):
                self._last_page_report = done
                say(f"{prefix}{path.name}: page {done}/{total}", err=True, nl=False)
                # Jarvis's own carriage return: the next report writes over this one
                typer.echo("\r" if self.tty and done < total else "\n", err=True, nl=False)
        elif event == "done":
            self.done += 1
            result = detail
            if result.status == "unchanged" and not self.show_unchanged:  # type: ignore[attr-defined]
                return
            say(f"{prefix}{result.status:9s} {path}  ({result.chunks} chunks)", err=True)  # type: ignore[attr-defined]
        elif event == "skip":
            self.done += 1
            say(f"{prefix}skipped   {path}: {detail}", err=True)
        elif event == "removed":
            say(f"removed   {path} (the file is gone)", err=True)


def _index(ctx: typer.Context):
    return state(ctx).app().docs_index


@docs_app.command("add")
def add(ctx: typer.Context, paths: list[Path] = typer.Argument(..., help="files or folders (PDF, text, Markdown)")) -> None:
    """Index files; folders are searched recursively. Unchanged files are skipped, changed ones re-indexed."""
    from orchestrator.docs_index.files import add_paths, wanted_files

    missing = [p for p in paths if not p.expanduser().exists()]
    if missing:
        fail(f"{missing[0]} does not exist")
    index = _index(ctx)
    files = list(wanted_files(paths))
    if not files:
        fail("no PDF, text or Markdown file under the given paths")
    report = add_paths(index, files, _Progress(len(files)))
    say(f"added {len(report.added)}, updated {len(report.updated)}, unchanged {len(report.unchanged)}, "
        f"failed {len(report.failed)} ({report.pages} pages read)")
    if report.failed and not (report.added or report.updated or report.unchanged):
        raise typer.Exit(1)


@docs_app.command("list")
def list_(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """The indexed documents: id, kind, chunks, when, source."""
    docs = _index(ctx).documents()
    if as_json:
        say(json.dumps([{"id": d.id, "kind": d.kind, "title": d.title, "source": d.source, "chunks": d.chunk_count,
                                "segments": d.segments, "source_tool": d.source_tool, "content_hash": d.content_hash,
                                "indexed_at": d.indexed_at.isoformat() + "Z"} for d in docs], indent=2))
        return
    if not docs:
        say("the index is empty: `jarvis docs add PATH` adds files")
    for d in docs:
        say(f"{d.id:4d}  {d.kind:7s} {d.chunk_count:5d} chunks  {d.indexed_at:%Y-%m-%d %H:%M}  {d.source}"
            + (f"  ({d.title})" if d.title and d.title != Path(d.source).name else ""))


@docs_app.command("remove")
def remove(ctx: typer.Context, ref: str = typer.Argument(..., help="the document's id (see `jarvis docs list`) or path")) -> None:
    """Drop a document from the index (the file itself is not touched)."""
    ref_value = ref if ref.isdigit() else str(Path(ref).expanduser().resolve()) if not ref.startswith("http") else ref
    doc = _index(ctx).remove(ref_value)
    if doc is None:
        fail(f"no indexed document {ref!r} (see `jarvis docs list`)")
    say(f"removed {doc.id}: {doc.source}")


@docs_app.command("sync")
def sync(ctx: typer.Context, reembed: bool = typer.Option(False, "--reembed", help="new vectors for every chunk "
                                                          "(after changing models.embeddings)")) -> None:
    """Re-index changed files, drop deleted ones, and add vectors where the embeddings endpoint was missing."""
    from orchestrator.docs_index.files import sync as do_sync

    index = _index(ctx)
    if reembed:
        index.clear_vectors()
    report = do_sync(index, _Progress(show_unchanged=False))
    stats = index.stats()
    say(f"updated {len(report.updated)}, unchanged {len(report.unchanged)}, removed {len(report.removed)}, "
        f"failed {len(report.failed)}; {stats['documents']} documents, {stats['chunks']} chunks, "
        f"{stats['vectors']} with vectors")


@docs_app.command("search")
def search(ctx: typer.Context, query: str, k: int = typer.Option(5, "-k", help="how many passages")) -> None:
    """Search the index from the terminal (what docs_search gives the planner)."""
    hits = _index(ctx).search(query, k)
    if not hits:
        say(f"No passage matches {query!r}. `jarvis docs list` shows what is indexed; `jarvis docs add PATH` "
            "adds more.")
        return
    for i, hit in enumerate(hits, 1):
        text = " ".join(hit.text.split())
        say(f"{i}. {hit.title or hit.source} {hit.where}  [{hit.source}]\n   {text[:300]}")


def register(app: typer.Typer) -> None:
    app.add_typer(docs_app, name="docs")
