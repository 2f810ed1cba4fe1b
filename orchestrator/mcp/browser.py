"""A browser MCP server's tools as Jarvis uses them (a server whose TOML has a [browser] section; mcp/playwright.toml).

- Each tool carries a `SiteScope` (tools/site_grants.py): the executor approves its steps per site and task, reads
  the page the task's browser shows from each result, and closes that browser when the task ends (each task has
  its own: mcp/browser_pool.py).
- Downloads: the server saves them in its own folder under data/ (`downloads_dir`, with snapshots and logs). Only a
  file an event of the result reports as downloaded ("Downloaded file NAME to ..." in "### Events"), that is
  really in that folder and came there during the task (never a file of an earlier task, nor one of the server's
  own snapshots and logs), reported while the task's browser has shown no site the user has not approved (such a
  site puts no file there: tools/site_grants.py; SiteScope.collect), is moved into the first of `fs.roots`, under a
  plain name (no folders, no leading dot) that never replaces a file already there ("records (1).csv"); the
  result then says where it is. A page chooses
  the name and starts downloads without a click, so it is treated as hostile: a page cannot write outside the
  root, hide a dotfile there, overwrite the user's files, or fill the disk: per task at most `max_task_downloads`
  files and `max_task_download_mb` in all are moved, and none that would leave the root's disk with less than
  `min_free_disk_mb` free (past that they stay in the server's folder, bounded by its --output-max-size, and the
  result says why).

The result format read here is Playwright MCP's: top-level sections, each under a "### Title" line, in a fixed
order ("Error", "Result", "Ran Playwright code", "Open tabs", "Page", ...). Text the page writes reaches some of
them as it is (console messages in "Result", an error, a dialog's message in "Modal state"), so a line there can
look like a header. A result is read only when its header lines are the server's (known titles, each once, in
order); the page's URL only from its "Page" section, and only when no section the page writes comes before it
(`claimed_page_url` gives it otherwise: tools/site_grants.py believes it only on the site the step was judged on);
downloads only from its "Events" section. A tab switch gets no "Page" section at all: `may_switch_tab` tells
such a call, and the page is unknown after it.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import shutil
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.runnables.config import ensure_config

from integrations.base import ToolError

from orchestrator.tools.executor import call_context
from orchestrator.tools.site_grants import SiteScope
from .config import BrowserSection, expand

log = logging.getLogger(__name__)

MB = 2**20
SERVER_SECTIONS = ("Error", "Result", "Ran Playwright code", "Open tabs", "Page", "Modal state", "WebMCP tools",
                   "Snapshot", "Events", "Paused")
_PAGE_WRITES = ("Error", "Result")  # before "Page", sections that hold the page's own text as it is
_HEADER = re.compile(r"^### (.*)$", re.M)
_PAGE_URL = re.compile(r"- Page URL: (\S+)\s*$")
_DOWNLOADED = re.compile(r'^- Downloaded file (.+?) to "([^"\n]+)"\s*$', re.M)
_TAB_LIST = re.compile(r"^(?:- \d+: (?:\(current\) )?\[|No open tabs\.)", re.M)
# one tab as Playwright MCP lists it: "- 1: (current) [title](url)" (" [crashed]" after); the title is the page's
# own text and may hold "](": the address is the last parenthesised part of the line
TAB_LINE = re.compile(r"^- (?P<n>\d+):(?P<current> \(current\))? \[.*\]\((?P<url>\S*)\)(?: \[crashed\])?$", re.M)
_SERVER_FILE = re.compile(r"[a-z]+-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.\w+")  # page-<time>.yml, console-<time>.log
_TAB_ACTIONS = frozenset({"new", "close", "select"})  # browser_tabs' actions that can change the current tab
_UNSAFE = re.compile(r"[^\w.\- ()\[\]+,=@]+")
_MAX_NAME = 120
_COPY_CHUNK = 1 << 20
_CLOCK_TICK_NS = 50_000_000  # file times come from the kernel's coarse clock, up to a tick behind time.time_ns()
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def server_sections(text: str) -> dict[str, tuple[int, int]] | None:
    """Where each top-level section's body is in a result (title -> (start, end)), as the server wrote them. None
    when a header line is not one the server writes there (an unknown title, a second one, one out of order) or
    text comes before the first: the page wrote it (a console message, a dialog's message), and no part of the
    result can be told from the page's own text then."""
    headers = list(_HEADER.finditer(text))
    if text[:headers[0].start() if headers else len(text)].strip():
        return None if headers else {}
    spans: dict[str, tuple[int, int]] = {}
    last = -1
    for n, header in enumerate(headers):
        title = header.group(1).rstrip()
        rank = SERVER_SECTIONS.index(title) if title in SERVER_SECTIONS else -1
        if rank <= last:
            return None
        last = rank
        end = headers[n + 1].start() if n + 1 < len(headers) else len(text)
        spans[title] = (min(header.end() + 1, end), end)
    return spans


def _page_section_url(text: str, spans: dict[str, tuple[int, int]]) -> str:
    start, end = spans["Page"]
    found = _PAGE_URL.fullmatch(text[start:end].split("\n", 1)[0])  # the server writes the URL first
    return found.group(1) if found else ""


def page_url(text: str) -> str | None:
    """The URL of the page the browser shows after a call, from the result's "### Page" section; None when the
    result names no page. "" (an unknown page: the next step asks) when a header line in it is the page's
    (`console.log("x\\n### Page\\n- Page URL: https://approved/")` once named the approved site while the browser
    showed another), or when a section the page writes comes before the Page section, which may then be the
    page's own text (see `claimed_page_url`)."""
    spans = server_sections(text)
    if spans is None:
        return ""
    if "Page" not in spans:
        return None
    if any(title in spans for title in _PAGE_WRITES):
        return ""
    return _page_section_url(text, spans)


def claimed_page_url(text: str) -> str | None:
    """The URL a result's Page section names after a section the page writes ("Result": a wait, a new tab, console
    messages; "Error"): the server's, or the page's own text when the server wrote no Page section. None when the
    result names none or is not the server's."""
    spans = server_sections(text)
    if not spans or "Page" not in spans or not any(title in spans for title in _PAGE_WRITES):
        return None
    return _page_section_url(text, spans) or None


def may_switch_tab(args: Mapping[str, Any], text: str) -> bool:
    """Whether a call may have changed which tab is current: browser_tabs new, close or select, or any call whose
    result lists the tabs or says none is open (browser_tabs, browser_close). Playwright MCP writes no "### Page"
    section after a tab switch, so without this the page of the tab left behind stayed the one steps were judged
    on."""
    if args.get("action") in _TAB_ACTIONS:
        return True
    spans = server_sections(text)
    if not spans or "Result" not in spans:
        return False
    start, end = spans["Result"]
    return bool(_TAB_LIST.search(text, start, end))


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


TaskKey = tuple[str, str | None]  # (thread id, task): tools/site_grants.py's key, mcp/browser_pool.py's too


def task_of_call() -> TaskKey:
    """(thread id, task) of the executor's call running now (tools/executor.py tool_config): a browser step goes
    to that task's own browser (mcp/provider.py), and what it downloads counts against that task's budget. A call
    from outside the executor is ("", None), a task of its own."""
    call = call_context(ensure_config()) or {}
    return str(call.get("thread_id") or ""), call.get("task")


@dataclass
class _Spent:
    files: int = 0
    bytes: int = 0


@dataclass
class _Tally:
    """What the downloads of one configured folder have come to in this process. One per folder, not per
    Downloads: the provider builds new tools (and a new Downloads) whenever a server restarts or the tools change,
    and a budget that started again then would bound nothing."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    spent: dict[TaskKey, _Spent] = field(default_factory=dict)  # per task
    users: dict[Path, tuple[TaskKey, int]] = field(default_factory=dict)  # per run's folder: its task, and since when
    last_step: dict[Path, int] = field(default_factory=dict)  # per run's folder: when its last result was read
    moving: dict[Path, threading.Lock] = field(default_factory=dict)  # per run's folder: one move at a time
    # a file older than this is no download of this process (a tick less, so one written just after is not older)
    started: int = field(default_factory=lambda: time.time_ns() - _CLOCK_TICK_NS)


_TALLIES: dict[str, _Tally] = {}  # downloads_dir as configured ({browser_dir} unexpanded) -> its tally
_TALLIES_LOCK = threading.Lock()


class Downloads:
    """Moves finished downloads from the server's folder into the file root, within a budget per task."""

    def __init__(self, staging: Path, root: Path, max_bytes: int = 200 * MB, max_task_bytes: int = 1024 * MB,
                 max_task_files: int = 100, min_free_bytes: int = 1024 * MB):
        self.staging = staging
        self.root = root
        self.max_bytes = max_bytes
        self.max_task_bytes = max_task_bytes
        self.max_task_files = max_task_files
        self.min_free_bytes = min_free_bytes
        with _TALLIES_LOCK:
            self._tally = _TALLIES.setdefault(str(staging), _Tally())

    def at(self, browser_dir: Path | None) -> "Downloads | None":
        """The mover of one run of the server (mcp/browser_pool.py): `{browser_dir}` in downloads_dir is its folder.
        None when the folder is not known."""
        if "{browser_dir}" not in str(self.staging):
            return self
        if browser_dir is None:
            return None
        mover = copy.copy(self)  # the same tally, another folder
        mover.staging = Path(str(self.staging).replace("{browser_dir}", str(browser_dir)))
        return mover

    def forget(self, task: TaskKey) -> None:
        """The task ended: its budget goes with it."""
        with self._tally.lock:
            self._tally.spent.pop(task, None)

    def collect(self, text: str, task: TaskKey | None = None, *, move: bool = True) -> str:
        """The result with each download its events report moved into the root and its line saying where it is now.
        A page can write "Downloaded file" lines of its own (a console message, a dialog) naming any file of the
        folder: only a file that came there since this task's first step, and not one of the server's own
        (snapshots, logs), is moved. Not "since this step": a download that ends as a step's result is written
        is reported in the next one, and a page that starts several at once has most of them end so.
        `move=False` (a result the executor withholds, or while the task's browser showed a site the user has not
        approved): nothing is moved, but the step is counted, so what it left is never taken for a later task's."""
        now, tally = time.time_ns(), self._tally
        task = task if task is not None else task_of_call()
        with tally.lock:
            user = tally.users.get(self.staging)
            if user is None or user[0] != task:  # the folder's run is another task's now
                user = tally.users[self.staging] = (task, tally.last_step.get(self.staging, tally.started))
            tally.last_step[self.staging] = now
            since, spent = user[1], tally.spent.setdefault(task, _Spent())
            moving = tally.moving.setdefault(self.staging, threading.Lock())
        spans = server_sections(text) if move and "Downloaded file" in text else None
        if not spans or "Events" not in spans:
            return text

        def move_one(match: re.Match[str]) -> str:
            reported = match.group(2)
            try:
                with moving:  # two calls of a step naming one file: it is moved once, and counted once
                    final = self._move(Path(reported).name, since, spent)
            except (OSError, ValueError, ToolError) as exc:  # ValueError: a NUL in a name a page wrote
                log.warning("a download could not be moved into %s: %s", self.root, exc)
                return f"- Downloaded file {match.group(1)}, but it could not be moved into {self.root}: {exc}"
            return f'- Downloaded file {match.group(1)} to "{final}"'

        start, end = spans["Events"]
        return text[:start] + _DOWNLOADED.sub(move_one, text[start:end]) + text[end:]

    def _move(self, staged_name: str, since: int, spent: _Spent) -> Path:
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
                if info.st_ctime_ns < since:
                    raise ToolError(f"it was in {self.staging} before this task's first step, so it is no download of "
                                    "this task")
                if _SERVER_FILE.fullmatch(staged_name):
                    raise ToolError(f"{staged_name} is named like the server's own files (snapshots, logs), which are "
                                    "not downloads")
                self._check_room(info.st_size, spent)
                try:
                    final = self._copy_into_root(src, safe_download_name(staged_name))
                except BaseException:
                    with self._tally.lock:  # not moved: given back
                        spent.files -= 1
                        spent.bytes -= info.st_size
                    raise
            finally:
                os.close(src)
            os.unlink(staged_name, dir_fd=staging_fd)
        finally:
            os.close(staging_fd)
        return final

    def _check_room(self, size: int, spent: _Spent) -> None:
        """Takes the file's share of the task's budget, or says which bound it is over (the file stays)."""
        stays = f"it stays in {self.staging}"
        if size > self.max_bytes:
            raise ToolError(f"it is {size / MB:.0f} MB, over max_download_mb ({self.max_bytes / MB:g} MB in the "
                            f"server's [browser] section); {stays}")
        free = shutil.disk_usage(self.root).free
        if free - size < self.min_free_bytes:
            raise ToolError(f"moving it ({size / MB:.1f} MB) would leave {max(free - size, 0) / MB:.0f} MB free on the "
                            f"disk of {self.root}, under min_free_disk_mb ({self.min_free_bytes / MB:g} MB in the "
                            f"server's [browser] section); {stays}")
        with self._tally.lock:
            if spent.files + 1 > self.max_task_files:
                raise ToolError(f"this task's browser has already moved {spent.files} files, max_task_downloads in "
                                f"the server's [browser] section; {stays}")
            if spent.bytes + size > self.max_task_bytes:
                raise ToolError(f"this task's downloads would pass max_task_download_mb "
                                f"({self.max_task_bytes / MB:g} MB in the server's [browser] section; "
                                f"{spent.bytes / MB:.1f} MB moved so far); {stays}")
            spent.files += 1
            spent.bytes += size

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
                except OSError:
                    os.unlink(candidate, dir_fd=root_fd)  # a disk that filled meanwhile: no half file left
                    raise
                finally:
                    os.close(dst)
                return self.root / candidate
            raise ToolError(f"{self.root} already has 1000 files named like {name}")
        finally:
            os.close(root_fd)


def browser_parts(server: str, section: BrowserSection, data_dir: Path, fs_roots: list[Path],
                  close: object) -> tuple[SiteScope, Downloads | None]:
    """The scope every tool of the server carries, and the download mover (None without downloads_dir or roots)."""
    downloads = None
    if section.downloads_dir and fs_roots:
        staging = Path(expand(section.downloads_dir, data_dir))
        root = Path(os.path.realpath(os.path.expanduser(str(fs_roots[0]))))
        downloads = Downloads(staging, root, int(section.max_download_mb * MB), int(section.max_task_download_mb * MB),
                              section.max_task_downloads, int(section.min_free_disk_mb * MB))

    def end_task(thread_id: str, task: str | None, approved: set[str]) -> None:  # its budget goes, its browser too
        if downloads is not None:
            downloads.forget((thread_id, task))
        close(thread_id, task, approved)  # type: ignore[operator]

    scope = SiteScope(browser=server, url_arg=section.url_arg, page_url=page_url, claimed_page_url=claimed_page_url,
                      may_switch_tab=may_switch_tab, close=end_task if callable(close) else None, tab_line=TAB_LINE)
    return scope, downloads
