"""File tools, confined to the configured roots (`fs.roots`).

Every path is resolved with symlinks followed before it is checked, so neither `..` nor a symlink pointing
outside a root gets through. Relative paths are taken from the first root.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from pathlib import Path

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool

_TEXT_SNIFF_BYTES = 4096
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".cache"}


class FsRoots:
    """The folders the file tools may touch, resolved once."""

    def __init__(self, roots: Sequence[Path | str]):
        resolved = [Path(os.path.realpath(os.path.expanduser(str(r)))) for r in roots]
        if not resolved:
            raise ValueError("fs.roots is empty: list at least one folder Jarvis may use")
        self.roots = resolved

    def describe(self) -> str:
        return ", ".join(str(r) for r in self.roots)

    def _inside(self, real: Path) -> bool:
        return any(real == root or root in real.parents for root in self.roots)

    def resolve(self, path: str, *, must_exist: bool = True) -> Path:
        if not path or not str(path).strip():
            raise ToolError("No path given: pass a file or folder path.")
        if "\x00" in str(path):
            raise ToolError("The path contains a NUL character; give a plain file or folder path.")
        raw = Path(os.path.expanduser(str(path).strip()))
        candidate = raw if raw.is_absolute() else self.roots[0] / raw
        try:
            real = Path(os.path.realpath(candidate))
        except (OSError, ValueError) as exc:  # a symlink loop, a name too long...
            raise ToolError(f"{path} cannot be resolved ({exc}).") from None
        if not self._inside(real):
            raise ToolError(
                f"{path} is outside the folders Jarvis may use ({self.describe()}); "
                "add its folder to fs.roots in the config to allow it."
            )
        if must_exist and not real.exists():
            raise ToolError(f"{path} does not exist.")
        return real


def _is_probably_text(p: Path) -> bool:
    try:
        with p.open("rb") as fh:
            chunk = fh.read(_TEXT_SNIFF_BYTES)
    except OSError:
        return False
    return b"\x00" not in chunk


class ListDirArgs(BaseModel):
    path: str = Field(description="folder to list; relative paths start at the first allowed root")


class ReadTextArgs(BaseModel):
    path: str = Field(description="text file to read")
    max_bytes: int | None = Field(None, gt=0, description="read at most this many bytes")


class WriteTextArgs(BaseModel):
    path: str = Field(description="file to create or overwrite")
    content: str = Field(description="the full text to write")


class SearchArgs(BaseModel):
    folder: str = Field(description="folder to search recursively")
    name_pattern: str | None = Field(None, description="glob on file names, e.g. '*.pdf' or '*report*'")
    content: str | None = Field(None, description="text to look for inside text files (case-insensitive)")
    max_results: int = Field(50, gt=0, le=1000)


def build_fs_tools(roots: Sequence[Path | str], max_read_bytes: int = 2_000_000, max_results: int = 200) -> list[BaseTool]:
    allowed = FsRoots(roots)

    def fs_list_dir(path: str) -> list[dict]:
        """List a folder: each entry's name, type (file/dir/link) and size in bytes."""
        folder = allowed.resolve(path)
        if not folder.is_dir():
            raise ToolError(f"{path} is a file, not a folder; use fs_read_text to read it.")
        entries = []
        try:
            listing = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise ToolError(f"Cannot list {path}: {exc.strerror or exc}.") from None
        for entry in listing:
            kind = "link" if entry.is_symlink() else "dir" if entry.is_dir() else "file"
            size = entry.stat(follow_symlinks=False).st_size if kind == "file" else None
            entries.append({"name": entry.name, "type": kind, "size": size})
        return entries

    def fs_read_text(path: str, max_bytes: int | None = None) -> str:
        """Read a text file and return its contents (the content comes from outside the conversation)."""
        file = allowed.resolve(path)
        if file.is_dir():
            raise ToolError(f"{path} is a folder; use fs_list_dir to see what it holds.")
        limit = min(max_bytes or max_read_bytes, max_read_bytes)
        try:
            with file.open("rb") as fh:
                data = fh.read(limit + 1)
        except OSError as exc:
            raise ToolError(f"Cannot read {path}: {exc.strerror or exc}.") from None
        if b"\x00" in data[:_TEXT_SNIFF_BYTES] or data.startswith(b"%PDF-"):
            hint = " Use pdf_extract_text for PDFs." if file.suffix.lower() == ".pdf" else ""
            raise ToolError(f"{path} is a binary file, not text.{hint}")
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[... truncated at {limit} bytes of {file.stat().st_size}]"
        return text

    def fs_write_text(path: str, content: str) -> str:
        """Create or overwrite a text file with the given content."""
        target = allowed.resolve(path, must_exist=False)
        if target.is_dir():
            raise ToolError(f"{path} is a folder; give a file path.")
        if not target.parent.exists():
            raise ToolError(f"The folder {target.parent} does not exist.")
        tmp = target.with_name(f".{target.name}.jarvis-tmp")
        try:
            tmp.write_text(content, encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ToolError(f"Could not write {path}: {exc.strerror or exc}.") from None
        return f"Wrote {len(content.encode('utf-8'))} bytes to {target}."

    def fs_search(folder: str, name_pattern: str | None = None, content: str | None = None, max_results: int = 50) -> list[dict]:
        """Find files under a folder by name (glob) and/or by text they contain. Returns paths with the first matching line."""
        base = allowed.resolve(folder)
        if not base.is_dir():
            raise ToolError(f"{folder} is not a folder.")
        if not name_pattern and not content:
            raise ToolError("Give name_pattern, content, or both.")
        limit = min(max_results, max_results_cap)
        needle = content.lower() if content else None
        found: list[dict] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for fname in sorted(filenames):
                if name_pattern and not fnmatch.fnmatch(fname.lower(), name_pattern.lower()):
                    continue
                p = Path(dirpath) / fname
                if p.is_symlink():
                    continue
                hit: dict = {"path": str(p)}
                if needle:
                    line = _first_match(p, needle, max_read_bytes)
                    if line is None:
                        continue
                    hit["line"] = line
                found.append(hit)
                if len(found) >= limit:
                    return found
        return found

    max_results_cap = max_results

    return [
        make_tool(fs_list_dir, args_schema=ListDirArgs, untrusted_output=False),
        make_tool(fs_read_text, args_schema=ReadTextArgs, untrusted_output=True),
        make_tool(
            fs_write_text,
            args_schema=WriteTextArgs,
            side_effects=["fs_write"],
            summarize=lambda a: f"Write {len(str(a.get('content', '')))} characters to {a.get('path')} (replacing it if it exists).",
        ),
        make_tool(fs_search, args_schema=SearchArgs, untrusted_output=True),
    ]


def _first_match(path: Path, needle: str, limit: int) -> str | None:
    if not _is_probably_text(path):
        return None
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            read = 0
            for lineno, line in enumerate(fh, 1):
                read += len(line)
                if needle in line.lower():
                    return f"{lineno}: {line.strip()[:200]}"
                if read > limit:
                    return None
    except OSError:
        return None
    return None
