"""One browser per task: a browser MCP server (a TOML with a [browser] section) runs once per task, not once for all.

Why: a browser is one process with one set of tabs and one profile. Two tasks driving one browser see each other's
pages, and the page one task approved is the page the other acts on. So each task (thread id + task, as
tools/site_grants.py keys its approvals) gets its own server process and its own Chromium, started on its first
step, stopped when the task ends (SiteGrants.end_task -> `release`: a turn answered, stopped or failed, a jorb
done, cancelled or failed) or after `idle_timeout_s` without a step (a turn that never reached its end, a jorb waiting for a reply). At most `max_browsers` run at once per server: a task beyond that is told
so, never handed another task's browser.

The server as configured in mcp/ still runs once, only to list the tools: no call goes to it, so it never opens a
browser. Each task's run is the same ServerConfig run by the manager's own machinery (restart with backoff, failure
reports) in its own folder, data/browser/<server>-<n> (`{browser_dir}` in its TOML; n = 1..max_browsers, reused,
so folders and logs stay bounded).

Logins: Chromium locks its profile folder, so tasks cannot share one, and a profile copied per task (tens of MB)
cannot be merged back. Instead each browser runs `--isolated` (profile in memory) loading `storage_state` (cookies
and local storage, one JSON file, mode 0600); when a task ends its browser's state is saved (`save_state_tool`)
and merged into that file for the sites the user approved in that task only: a site the task merely passed
through (an ad frame, a redirect) leaves nothing behind, and a login made in one task is there for the next.

Memory: each run's process tree (the server and the Chromium it starts) is in its own memory cgroup
(core/cgroups.py, `memory_mb` in [browser]) from the server's first instruction, so no process of it is outside.
When the kernel kills a process of it for going over (a page allocating without end), the whole run is killed and
dropped, the step is told "the browser ran out of its memory bound (N MB) and was restarted", and the task's next
step gets a new browser, as after a crash. The cgroup is removed with its run (task ended, idle, out of memory,
server stopped). Where no memory cgroup can be made (not Linux, not delegated), the browsers keep the soft bounds
of mcp/playwright.json (V8 heap, renderer count), said once in the log and in `jarvis mcp status`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from integrations.base import ToolError

from orchestrator.core import cgroups, json_bounds
from orchestrator.core.aio import run_sync
from orchestrator.core.cgroups import CgroupLimits, RunCgroup
from orchestrator.core.private_file import write_private
from .config import BrowserSection, ServerConfig, expand
from .server_state import ServerRuntime, State, on_background_loop

log = logging.getLogger(__name__)

TaskKey = tuple[str, str | None]  # (thread id, task): tools/site_grants.py's key
_MAX_STATE_BYTES = 16 * 2**20  # a storage state bigger than this is not read (not a browser's cookies)
_IDLE_CHECK_S = 5.0  # the idle watcher looks at least this often


@dataclass
class BrowserRun:
    """One task's browser: its server's runtime and folder."""

    server: str
    task: TaskKey
    slot: int
    runtime: ServerRuntime
    folder: Path
    last_used: float
    busy: int = 0  # calls in flight or starting (never closed for idleness meanwhile)
    cgroup: RunCgroup | None = None  # its memory bound (None: soft bounds only)
    oom_kills: int = 0  # the kernel's kills in its cgroup already reported

    def label(self) -> str:
        return f"{self.runtime.label} (thread {self.task[0]!r}, {self.task[1] or 'no task'})"


class BrowserPool:
    """The per-task runs of every browser server of one McpManager (thread-safe)."""

    def __init__(self, manager: Any):
        self.manager = manager  # the McpManager that runs the servers (duck-typed: settings, _spawn, _stop_servers)
        self._runs: dict[tuple[str, TaskKey], BrowserRun] = {}
        self._lock = threading.Lock()
        self._state_lock = threading.Lock()  # one merge into a storage state file at a time
        self._watcher: asyncio.Task | None = None
        self.clock = time.monotonic  # what idleness is measured with (a test freezes it)
        self._told_unbounded = False  # "soft memory bounds only" is logged once

    def runs(self, server: str | None = None) -> list[BrowserRun]:
        with self._lock:
            return [r for r in self._runs.values() if server is None or r.server == server]

    def folder_of(self, server: str, task: TaskKey) -> Path | None:
        with self._lock:
            run = self._runs.get((server, task))
            return run.folder if run is not None else None

    # -- using a task's browser (background loop) ------------------------------------------------------
    @asynccontextmanager
    async def use(self, template: ServerRuntime, task: TaskKey) -> AsyncIterator[ServerRuntime]:
        """The runtime of `task`'s browser on the server `template` runs, started on its first use."""
        run, new = self._take(template, task)
        try:
            if new:
                self._prepare_state(run.runtime.cfg.browser)
                run.cgroup = run.runtime.cgroup = self._memory_cgroup(run.runtime.cfg)
                await self.manager._spawn(run.runtime)
                self._watch_idle()
            await self._check_memory(run)  # killed between two steps
            try:
                yield run.runtime
            except Exception:
                await self._check_memory(run)  # the step failed because its browser was killed
                raise
            await self._check_memory(run)  # killed as the step ended: what it returned is gone
        finally:
            with self._lock:
                run.busy -= 1
                run.last_used = self.clock()

    def _take(self, template: ServerRuntime, task: TaskKey) -> tuple[BrowserRun, bool]:
        cfg = template.cfg
        section = cfg.browser
        assert section is not None
        with self._lock:
            run = self._runs.get((cfg.name, task))
            new = run is None
            if run is None:
                taken = {r.slot for r in self._runs.values() if r.server == cfg.name}
                if len(taken) >= section.max_browsers:
                    raise ToolError(
                        f"no browser is free for this task: the {len(taken)} browsers the MCP server {cfg.name} may run "
                        f"at once (max_browsers in the [browser] section of {cfg.source or cfg.name + '.toml'}) are "
                        "all in use by other tasks. Tell the user; a browser is freed when its task ends or after "
                        f"{section.idle_timeout_s:g} s without a step (idle_timeout_s), or they can raise max_browsers.")
                slot = next(n for n in itertools.count(1) if n not in taken)
                folder = Path(self.manager.settings.data_dir) / "browser" / f"{cfg.name}-{slot}"
                runtime = ServerRuntime(cfg, label=f"{cfg.name}-{slot}", browser_dir=folder)
                run = self._runs[(cfg.name, task)] = BrowserRun(cfg.name, task, slot, runtime, folder, self.clock())
            run.busy += 1
            run.last_used = self.clock()
        return run, new

    # -- memory -----------------------------------------------------------------------------------------
    def _memory_cgroup(self, cfg: ServerConfig) -> RunCgroup | None:
        mb = cfg.browser.memory_mb  # type: ignore[union-attr]
        cgroup = None
        if mb and sys.platform.startswith("linux"):
            cgroup = RunCgroup.create(CgroupLimits(memory_bytes=mb * 2**20), kind="browser")
        if cgroup is None and not self._told_unbounded:
            self._told_unbounded = True
            log.warning("the browsers of the MCP server %s: %s", cfg.name, self.memory_note(cfg))
        return cgroup

    def memory_note(self, cfg: ServerConfig) -> str:
        """How a task's browser of this server is bounded in memory here (`jarvis mcp status`)."""
        mb = cfg.browser.memory_mb  # type: ignore[union-attr]
        soft = "soft memory bounds only (V8 heap, renderer count: mcp/playwright.json)"
        if not mb:
            return f"each task's browser: {soft}; memory_mb = 0 in [browser]"
        if not sys.platform.startswith("linux"):
            why = "cgroups are Linux only"
        else:
            why = cgroups.missing().get("memory")
        if why is None:
            return f"each task's browser is bounded to {mb} MB (a memory cgroup)"
        return f"each task's browser: {soft}; no memory cgroup can be made here: {why}"

    async def _check_memory(self, run: BrowserRun) -> None:
        """The kernel killed a process of the run for memory: the run is killed and dropped (the task's next step
        gets a new browser), and the step is told so."""
        if run.cgroup is None or (kills := run.cgroup.oom_kills()) <= run.oom_kills:
            return
        run.oom_kills = kills
        with self._lock:
            if self._runs.get((run.server, run.task)) is run:
                del self._runs[(run.server, run.task)]
        cfg = run.runtime.cfg
        mb = cfg.browser.memory_mb  # type: ignore[union-attr]
        log.warning("the browser of %s went over its memory bound (%d MB): restarting it", run.label(), mb)
        run.runtime.stopping = True  # its end is no crash to restart from
        await asyncio.to_thread(run.cgroup.kill_all)
        await self._stop(run)
        raise ToolError(
            f"the browser ran out of its memory bound ({mb} MB, memory_mb in the [browser] section of "
            f"{cfg.source.name if cfg.source else cfg.name + '.toml'}) and was restarted: the pages it showed are "
            "gone and the next step gets a new browser. The page took more memory than that; tell the user if it "
            "is needed.")

    # -- closing -----------------------------------------------------------------------------------------
    def release(self, server: str, task: TaskKey, approved: Iterable[str] = ()) -> bool:
        """The task ended: save what it may keep (the storage of the `approved` origins), close its browser and
        stop its server. False when the task had no browser there."""
        with self._lock:
            run = self._runs.pop((server, task), None)
        if run is None:
            return False
        if on_background_loop():  # cannot wait here for the loop that does the closing
            asyncio.get_running_loop().create_task(self._close(run, set(approved)))
        else:
            run_sync(self._close(run, set(approved)))
        return True

    def stop_server(self, server: str) -> None:
        """Its configuration changed or went: every run of it stops (nothing saved)."""
        with self._lock:
            gone = [self._runs.pop(k) for k in [k for k in self._runs if k[0] == server]]
        self._stop_now(gone)

    def stop_all(self) -> None:
        with self._lock:
            gone = list(self._runs.values())
            self._runs.clear()
        self._stop_now(gone)

    def _stop_now(self, runs: list[BrowserRun]) -> None:
        self.manager._stop_servers([r.runtime for r in runs])
        for run in runs:
            if run.cgroup is not None:
                run.cgroup.remove()  # a Chromium its stopped server left behind goes with it

    async def _close(self, run: BrowserRun, approved: set[str]) -> None:
        srv, section = run.runtime, run.runtime.cfg.browser
        assert section is not None
        if srv.state == State.READY:
            if approved and section.storage_state and section.save_state_tool:
                try:
                    await self._save_state(run, section, approved)
                except Exception as exc:  # noqa: BLE001 - the task's logins are lost, nothing else
                    log.warning("the browser of %s could not save its logins: %s", run.label(), exc)
            if section.close_tool:  # Chromium exits on its own before its server is stopped
                try:
                    await self.manager.call_runtime(srv, section.close_tool, {})
                except Exception as exc:  # noqa: BLE001 - a browser already gone is closed enough
                    log.info("closing the browser of %s: %s", run.label(), exc)
        await self._stop(run)
        log.info("the browser of %s is closed", run.label())

    async def _stop(self, run: BrowserRun) -> None:
        await asyncio.to_thread(self._stop_now, [run])

    def _watch_idle(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._close_idle(), name="browser-idle")

    async def _close_idle(self) -> None:
        """Close every browser no call used for its `idle_timeout_s`; ends when no browser runs."""
        while True:
            now, wait, idle = self.clock(), _IDLE_CHECK_S, []
            with self._lock:
                if not self._runs:
                    return
                for key, run in list(self._runs.items()):
                    limit = run.runtime.cfg.browser.idle_timeout_s  # type: ignore[union-attr]
                    left = run.last_used + limit - now
                    if run.busy == 0 and left <= 0:
                        idle.append(self._runs.pop(key))
                    else:
                        wait = min(wait, max(left, 0.05))
            for run in idle:
                log.info("the browser of %s was idle for %g s: closing it", run.label(),
                         run.runtime.cfg.browser.idle_timeout_s)  # type: ignore[union-attr]
                await self._close(run, set())
            await asyncio.sleep(wait)

    # -- logins --------------------------------------------------------------------------------------------
    def _state_file(self, section: BrowserSection | None) -> Path | None:
        if section is None or not section.storage_state:
            return None
        return Path(expand(section.storage_state, self.manager.settings.data_dir))

    def _prepare_state(self, section: BrowserSection | None) -> None:
        """The server loads the file at start: it must exist (empty at first), readable by the user only."""
        path = self._state_file(section)
        if path is None or path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, json.dumps({"cookies": [], "origins": []}))

    async def _save_state(self, run: BrowserRun, section: BrowserSection, approved: set[str]) -> None:
        saved = run.folder / "storage-state.json"  # inside the server's cwd ({browser_dir}): it may write there
        saved.unlink(missing_ok=True)
        await self.manager.call_runtime(run.runtime, section.save_state_tool, {"filename": str(saved)})
        fresh = _read_state(saved)
        saved.unlink(missing_ok=True)
        target = self._state_file(section)
        assert target is not None
        with self._state_lock:
            write_private(target, json.dumps(merge_state(_read_state(target), fresh, approved)))


def _host_of_cookie(cookie: dict[str, Any]) -> str:
    return str(cookie.get("domain") or "").lstrip(".").lower()


def _belongs(cookie: dict[str, Any], host: str) -> bool:
    domain = _host_of_cookie(cookie)  # a parent domain counts, never a bare suffix such as "org"
    return bool(domain) and (host == domain or ("." in domain and host.endswith("." + domain)))


def merge_state(kept: dict[str, Any], fresh: dict[str, Any], approved: Iterable[str]) -> dict[str, Any]:
    """`kept` (the file) updated with what `fresh` (a task's browser) holds for the `approved` origins only.

    A host of an approved origin for which the task's browser has cookies gets exactly those (a new login replaces
    the old one); a host for which it has none keeps what the file had (a browser that crashed and came back empty
    logs nobody out). Local storage likewise, per origin."""
    origins = {o.rstrip("/") for o in approved}
    hosts = {(urlsplit(o).hostname or "").lower() for o in origins} - {""}
    new_cookies = [c for c in fresh.get("cookies", []) if isinstance(c, dict) and any(_belongs(c, h) for h in hosts)]
    renewed = {h for h in hosts if any(_belongs(c, h) for c in new_cookies)}
    cookies = [c for c in kept.get("cookies", []) if isinstance(c, dict)
               and not any(_belongs(c, h) for h in renewed)] + new_cookies
    fresh_origins = {str(e.get("origin", "")).rstrip("/"): e for e in fresh.get("origins", [])
                     if isinstance(e, dict) and str(e.get("origin", "")).rstrip("/") in origins}
    stored = [e for e in kept.get("origins", []) if isinstance(e, dict)
              and str(e.get("origin", "")).rstrip("/") not in fresh_origins] + list(fresh_origins.values())
    return {"cookies": cookies, "origins": stored}


def _read_state(path: Path) -> dict[str, Any]:
    """A storage state file; anything unreadable (missing, too big, not a state) counts as empty."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_STATE_BYTES + 1)
        if len(raw) > _MAX_STATE_BYTES:
            raise ValueError(f"over {_MAX_STATE_BYTES // 2**20} MB")
        data = json_bounds.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except (OSError, ValueError) as exc:
        log.warning("the browser storage state %s is not usable (%s): starting from none", path, exc)
        return {"cookies": [], "origins": []}
