"""A browser MCP server's tools as Jarvis uses them (a server whose TOML has a [browser] section; mcp/playwright.toml).

- Each tool carries a `SiteScope` (tools/site_grants.py): the executor approves its steps per site and task, reads
  the page the task's browser shows from each result, and closes that browser when the task ends (each task has
  its own: mcp/browser_pool.py).
- Downloads: the server saves them in its own folder under data/ (`downloads_dir`, with snapshots and logs). Only a
  file the result reports as downloaded ("Downloaded file NAME to ...") and that is really in that folder is
  moved into the first of `fs.roots`, under a plain name (no folders, no leading dot) that never replaces a file
  already there ("records (1).csv"); the result then says where it is. A page chooses the name, so it is treated
  as hostile: a page cannot write outside the root, hide a dotfile there, or overwrite the user's files.

The result format read here is Playwright MCP's (`- Page URL: ...` in its "### Page" section, `- Downloaded file
... to "..."` in "### Events"); the first Page URL line is the server's own, written before any page text.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path

from integrations.base import ToolError

from orchestrator.tools.site_grants import SiteScope
from .config import BrowserSection, expand

log = logging.getLogger(__name__)

_PAGE_URL = re.compile(r"^- Page URL: (\S+)\s*$", re.M)
_DOWNLOADED = re.compile(r'^- Downloaded file (.+?) to "([^"\n]+)"\s*$', re.M)
_UNSAFE = re.compile(r"[^\w.\- ()\[\]+,=@]+")
_MAX_NAME = 120
_COPY_CHUNK = 1 << 20
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def page_url(text: str) -> str | None:
    """The URL of the page the browser shows after a call, from the result's "### Page" section; None when the
    result names no page. "" (an unknown page: the next step asks) when it holds more than one such section: the
    result's own part comes first and may quote the page (`console.log("### Page\n- Page URL: https://approved/")`
    in console messages named the approved site while the browser showed another)."""
    if text.count("### Page\n") > 1:
        return ""
    section = text.find("### Page\n")
    if section < 0:
        return None
    found = _PAGE_URL.search(text, section)
    return found.group(1) if found else None


def safe_download_name(name: str) -> str:
    """A plain file name for the root: the last path part, unusual characters replaced, no leading dot."""
    base = re.split(r"[\\/]", name.strip())[-1]
    base = _UNSAFE.sub("_", base).strip(" .")
    if not base or base in (".", ".."):
        base = "download"
    stem, dot, ext = base.rpartition(".")
    if dot and len(ext) <= 16:
        return f"{stem[:_MAX_NAME]}.{ext}" if stem else f"download.{ext}"
    return base[:_MAX_NAME]


class Downloads:
    """Moves finished downloads from the server's folder into the file root."""

    def __init__(self, staging: Path, root: Path, max_bytes: int = 200 * 2**20):
        self.staging = staging
        self.root = root
        self.max_bytes = max_bytes

    def at(self, browser_dir: Path | None) -> "Downloads | None":
        """The mover of one run of the server (mcp/browser_pool.py): `{browser_dir}` in downloads_dir is its folder.
        None when the folder is not known."""
        if "{browser_dir}" not in str(self.staging):
            return self
        if browser_dir is None:
            return None
        return Downloads(Path(str(self.staging).replace("{browser_dir}", str(browser_dir))), self.root, self.max_bytes)

    def collect(self, text: str) -> str:
        """The result with each reported download moved into the root and its line saying where it is now."""
        def move(match: re.Match[str]) -> str:
            reported = match.group(2)
            try:
                final = self._move(Path(reported).name)
            except (OSError, ToolError) as exc:
                log.warning("a download could not be moved into %s: %s", self.root, exc)
                return f"- Downloaded file {match.group(1)}, but it could not be moved into {self.root}: {exc}"
            return f'- Downloaded file {match.group(1)} to "{final}"'

        return _DOWNLOADED.sub(move, text) if "Downloaded file" in text else text

    def _move(self, staged_name: str) -> Path:
        if staged_name in ("", ".", "..") or "/" in staged_name:
            raise ToolError(f"{staged_name!r} is not a file of the download folder")
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        staging_fd = os.open(self.staging, _DIR)
        try:
            src = os.open(staged_name, flags, dir_fd=staging_fd)  # a symlink planted there is refused
            try:
                info = os.fstat(src)
                if not stat.S_ISREG(info.st_mode):
                    raise ToolError(f"{staged_name} is not a regular file")
                if info.st_size > self.max_bytes:
                    raise ToolError(f"it is {info.st_size / 2**20:.0f} MB, over max_download_mb "
                                    f"({self.max_bytes / 2**20:g} MB in the server's [browser] section); it stays in "
                                    f"{self.staging}")
                final = self._copy_into_root(src, safe_download_name(staged_name))
            finally:
                os.close(src)
            os.unlink(staged_name, dir_fd=staging_fd)
        finally:
            os.close(staging_fd)
        return final

    def _copy_into_root(self, src: int, name: str) -> Path:
        root_fd = os.open(self.root, _DIR)  # the resolved root: swapped for a symlink since, it is refused
        try:
            stem, dot, ext = name.rpartition(".")
            if not dot:
                stem, ext = name, ""
            for n in range(1000):
                candidate = name if n == 0 else f"{stem} ({n}){'.' + ext if ext else ''}"
                try:
                    dst = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                                  dir_fd=root_fd)
                except FileExistsError:
                    continue  # never replace what is there
                try:
                    while chunk := os.read(src, _COPY_CHUNK):
                        os.write(dst, chunk)
                finally:
                    os.close(dst)
                return self.root / candidate
            raise ToolError(f"{self.root} already has 1000 files named like {name}")
        finally:
            os.close(root_fd)


def browser_parts(server: str, section: BrowserSection, data_dir: Path, fs_roots: list[Path],
                  close: object) -> tuple[SiteScope, Downloads | None]:
    """The scope every tool of the server carries, and the download mover (None without downloads_dir or roots)."""
    scope = SiteScope(browser=server, url_arg=section.url_arg, page_url=page_url,
                      close=close if callable(close) else None)
    downloads = None
    if section.downloads_dir and fs_roots:
        staging = Path(expand(section.downloads_dir, data_dir))
        root = Path(os.path.realpath(os.path.expanduser(str(fs_roots[0]))))
        downloads = Downloads(staging, root, int(section.max_download_mb * 2**20))
    return scope, downloads
