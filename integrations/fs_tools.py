"""File tools, confined to the configured roots (`fs.roots`).

Every path is resolved with symlinks followed before it is checked, so neither `..` nor a symlink pointing
outside a root gets through. Relative paths are taken from the first root. The checked path is then opened
from its root one component at a time with O_NOFOLLOW (`FsRoots.open`), so a folder swapped for a symlink
between the check and the open fails instead of leading outside; a write goes through a temporary file created
exclusively (O_EXCL | O_NOFOLLOW, a random name) in the opened folder, then renamed over the target.
"""

from __future__ import annotations

import fnmatch
import heapq
import os
import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool

_TEXT_SNIFF_BYTES = 4096
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".cache"}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FsRoots:
    """The folders the file tools may touch, resolved once."""

    def __init__(self, roots: Sequence[Path | str],
                 protected: Sequence[Path | str] | Callable[[], Sequence[Path | str]] = (), *,
                 name_root_when_outside: bool = False):
        """protected: places inside the roots that are never written (Jarvis's own config, data, tools and code,
        key stores): a document must not be able to talk Jarvis into rewriting its own policy.
        name_root_when_outside: a path outside every root is refused with what the first root holds (the file
        tools, which a small model reaches for with a made-up path; the PDF tools keep their one-line errors)."""
        self.name_root_when_outside = name_root_when_outside
        resolved = [Path(os.path.realpath(os.path.expanduser(str(r)))) for r in roots]
        if not resolved:
            raise ValueError("fs.roots is empty: list at least one folder Jarvis may use")
        self.roots = resolved
        self._protected = protected if callable(protected) else (lambda fixed=list(protected): fixed)

    @property
    def protected(self) -> list[Path]:
        """Read at each check: a key file or start-up file made since Jarvis started is protected too."""
        return [Path(os.path.realpath(os.path.expanduser(str(p)))) for p in self._protected()]

    def check_writable(self, real: Path, path: str) -> None:
        for p in self.protected:
            if real == p or p in real.parents:
                raise ToolError(f"{path} is inside {p}, which is part of Jarvis itself (its config, data, tools or "
                                "code), a key store, or what your shell, login, git or Python runs: Jarvis does "
                                "not write there. Edit it yourself if you mean to.")

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
                f"{path} is outside the folders Jarvis may use ({self.describe()})"
                f"{self._listing(self.roots[0]) if self.name_root_when_outside else ''}; "
                "add its folder to fs.roots in the config to allow it."
            )
        if must_exist and not real.exists():
            raise ToolError(f"{path} does not exist{self._what_is_there(real)}.")
        return real

    def _what_is_there(self, missing: Path) -> str:
        """What the nearest existing folder holds, so a wrong name can be put right (a small model asked for "my
        folder" calls fs_list_dir("myfolder.txt"), then repeats the error to the user). The names are what fs_list_dir would show: the
        tools that resolve paths mark their output, errors included, as outside content."""
        folder = missing.parent
        while not folder.is_dir() and self._inside(folder.parent):
            folder = folder.parent
        return self._listing(folder)

    def _listing(self, folder: Path, shown: int = 25) -> str:
        """", there are a, b in FOLDER (...)": the first names in a folder Jarvis may use, or "" (none to show).
        Also said for a path outside every root (the 135M model asked for "my folder" writes
        "/home/user/my-folder.txt" at some hours of its prompt's clock line): the user's own folder is what it meant."""
        if not (folder.is_dir() and self._inside(folder)):
            return ""
        try:
            fd = self.open_dir(folder)
        except OSError:
            return ""
        try:
            names = sorted(e.name + ("/" if e.is_dir(follow_symlinks=False) else "") for e in os.scandir(fd))
        except OSError:
            return ""
        finally:
            os.close(fd)
        if not names:
            return f", and the folder {folder} is empty"
        more = f" and {len(names) - shown} more" if len(names) > shown else ""
        # one sentence, the names before the (long) folder path: a small model repeating the error to the user
        # stops at its first full stop or at its token limit
        return f"; there are {', '.join(names[:shown])}{more} in {folder} (use one of these, or that folder itself)"

    def _root_of(self, real: Path) -> Path:
        return max((r for r in self.roots if real == r or r in real.parents), key=lambda r: len(r.parts))

    def open_dir(self, real: Path) -> int:
        """An fd of the checked folder `real`, reached from its root without following any symlink."""
        root = self._root_of(real)
        fd = os.open(root, _DIR_FLAGS)
        try:
            for part in real.relative_to(root).parts:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open(self, real: Path, flags: int = os.O_RDONLY) -> int:
        """An fd of the checked file `real`: its folder by `open_dir`, the file itself with O_NOFOLLOW."""
        folder = self.open_dir(real.parent)
        try:
            return os.open(real.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        finally:
            os.close(folder)


def _moved(path: str, exc: OSError) -> ToolError:
    """A path that changed between its check and its use (a folder or file swapped for a symlink)."""
    return ToolError(f"Cannot use {path}: part of it is a symbolic link or changed while Jarvis was using it "
                     f"({exc.strerror or exc}); nothing was done.")


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


def build_fs_tools(roots: Sequence[Path | str], max_read_bytes: int = 2_000_000, max_results: int = 200,
                   protected: Sequence[Path | str] | Callable[[], Sequence[Path | str]] = (), max_listed: int = 1000,
                   search_budget_s: float = 30.0) -> list[BaseTool]:
    """max_listed: entries fs_list_dir shows (a folder of a million files was read, stat'ed and sent whole);
    search_budget_s: how long fs_search walks before answering with what it found (a search for a name that is
    nowhere walked the whole tree, however large, reading every file when content was given)."""
    allowed = FsRoots(roots, protected, name_root_when_outside=True)

    def fs_list_dir(path: str) -> list[dict]:
        """List a folder: each entry's name, type (file/dir/link) and size in bytes."""
        folder = allowed.resolve(path)
        if not folder.is_dir():
            raise ToolError(f"{path} is a file, not a folder; use fs_read_text to read it.")
        entries = []
        try:
            fd = allowed.open_dir(folder)
        except OSError as exc:
            raise _moved(path, exc) from None
        total = 0

        def counted(it: Any) -> Any:
            nonlocal total
            for entry in it:
                total += 1
                yield entry

        try:  # the entries stat through the folder's fd: it stays open until they are read
            with os.scandir(fd) as it:  # the first max_listed by name, without holding the whole folder
                first = heapq.nsmallest(max_listed, counted(it), key=lambda e: e.name)
            for entry in first:
                kind = "link" if entry.is_symlink() else "dir" if entry.is_dir() else "file"
                size = entry.stat(follow_symlinks=False).st_size if kind == "file" else None
                entries.append({"name": entry.name, "type": kind, "size": size})
        except OSError as exc:
            raise ToolError(f"Cannot list {path}: {exc.strerror or exc}.") from None
        finally:
            os.close(fd)
        if total > max_listed:
            entries.append({"note": f"{total - max_listed} more entries not listed (the first {max_listed} by name "
                                    "are above); use fs_search with a name_pattern to find one."})
        return entries

    def fs_read_text(path: str, max_bytes: int | None = None) -> str:
        """Read a text file and return its contents (the content comes from outside the conversation)."""
        file = allowed.resolve(path)
        if file.is_dir():
            raise ToolError(f"{path} is a folder; use fs_list_dir to see what it holds.")
        limit = min(max_bytes or max_read_bytes, max_read_bytes)
        try:
            fd = allowed.open(file)
        except OSError as exc:
            raise _moved(path, exc) from None
        try:
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(limit + 1)
                size = os.fstat(fh.fileno()).st_size
        except OSError as exc:
            raise ToolError(f"Cannot read {path}: {exc.strerror or exc}.") from None
        if b"\x00" in data[:_TEXT_SNIFF_BYTES] or data.startswith(b"%PDF-"):
            hint = " Use pdf_extract_text for PDFs." if file.suffix.lower() == ".pdf" else ""
            raise ToolError(f"{path} is a binary file, not text.{hint}")
        text = data[:limit].decode("utf-8", errors="replace")
        if len(data) > limit:
            text += f"\n[... truncated at {limit} bytes of {size}]"
        return text

    def fs_write_text(path: str, content: str) -> str:
        """Create or overwrite a text file with the given content."""
        target = allowed.resolve(path, must_exist=False)
        allowed.check_writable(target, path)
        if target.is_dir():
            raise ToolError(f"{path} is a folder; give a file path.")
        if not target.parent.exists():
            raise ToolError(f"The folder {target.parent} does not exist.")
        try:
            folder = allowed.open_dir(target.parent)
        except OSError as exc:
            raise _moved(path, exc) from None
        tmp = f".{target.name[:64]}.{secrets.token_hex(6)}.jarvis-tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=folder)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(content)
            os.replace(tmp, target.name, src_dir_fd=folder, dst_dir_fd=folder)  # replaces a link, never follows it
        except OSError as exc:
            try:
                os.unlink(tmp, dir_fd=folder)
            except OSError:
                pass
            raise ToolError(f"Could not write {path}: {exc.strerror or exc}.") from None
        finally:
            os.close(folder)
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
        deadline = time.monotonic() + search_budget_s
        # fwalk opens each folder relative to its parent's fd without following links: a folder swapped for
        # a symlink during the walk is not entered
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(base, follow_symlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for fname in [*sorted(filenames), None]:  # None: the budget is checked in folders without files too
                if time.monotonic() >= deadline:
                    found.append({"note": f"The search stopped after {search_budget_s:g} s, in {dirpath}, before "
                                          "the whole folder was searched: these are the files found so far; search "
                                          "a smaller folder for the rest."})
                    return found
                if fname is None:
                    break
                if name_pattern and not fnmatch.fnmatch(fname.lower(), name_pattern.lower()):
                    continue
                p = Path(dirpath) / fname
                if p.is_symlink():
                    continue
                hit: dict = {"path": str(p)}
                if needle:
                    line = _first_match(fname, dir_fd, needle, max_read_bytes)
                    if line is None:
                        continue
                    hit["line"] = line
                found.append(hit)
                if len(found) >= limit:
                    return found
        return found

    max_results_cap = max_results

    def written_to(path: Any) -> str:
        """The file a write replaces, as the question names it: a link (`repo/NOTES.md -> ~/.bashrc`) or a
        relative path is written where it resolves, so the question says where that is."""
        try:
            target = str(allowed.resolve(str(path), must_exist=False))
        except ToolError:
            return str(path)  # refused when it runs, with the reason
        return target if target == str(path).strip() else f"{target} (given as {path})"

    return [
        # file names are content too: anyone who can put a file in a folder can write an instruction in its name
        make_tool(fs_list_dir, args_schema=ListDirArgs),
        make_tool(fs_read_text, args_schema=ReadTextArgs),
        make_tool(
            fs_write_text,
            args_schema=WriteTextArgs,
            side_effects=["fs_write"],
            summarize=lambda a: f"Write {len(str(a.get('content', '')))} characters to {written_to(a.get('path'))} "
                                "(replacing it if it exists).",
            trusted_output="the path and size of what this call wrote",
            deciding_args=("path",),
        ),
        make_tool(fs_search, args_schema=SearchArgs),
    ]


def _first_match(name: str, dir_fd: int, needle: str, limit: int) -> str | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as raw:
            if b"\x00" in raw.read(_TEXT_SNIFF_BYTES):
                return None
            raw.seek(0)
            read = 0
            for lineno, line_bytes in enumerate(raw, 1):
                read += len(line_bytes)
                line = line_bytes.decode("utf-8", errors="replace")
                if needle in line.lower():
                    return f"{lineno}: {line.strip()[:200]}"
                if read > limit:
                    return None
    except OSError:
        return None
    return None
