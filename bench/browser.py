"""Memory of the browser each task gets (orchestrator/mcp/browser_pool.py): the process tree of one task's Playwright
MCP server (node) and its Chromium, measured on the local app X (tests/fakes/app_x.py: log in, snapshot, page,
export the records) for one task and for three tasks at once, against the bound the flags in mcp/playwright.json
set (V8 heap per renderer x the renderer limit). The issue gives no memory anchor: figures, and the ratio to that
bound.

PSS (/proc/PID/smaps_rollup) is each process's fair share of what it maps: summed over a tree it does not count
the shared libraries once per process as RSS does (RSS is printed too). Chromium's crash handlers leave the tree
(they reparent to init) and are not counted: a few MB.

    python bench/browser.py          (needs Chromium and Node.js: make install-system; the npm package is fetched)
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time

from _common import REPO, isolated_settings

from orchestrator.core.aio import run_sync
from orchestrator.mcp.manager import McpManager
from orchestrator.mcp.provider import result_text
from tests.fakes.app_x import PASSWORD, USER, AppX
from tests.mcp_helpers import alive, install_playwright, pids_with_arg, process_tree

CLI = REPO / ".cache" / "npm" / "node_modules" / "@playwright" / "mcp" / "cli.js"
SERVER = "playwright"
MB = 2**20


def _kb_field(path: str, field: str) -> int:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_memory(pids: list[int]) -> tuple[int, int]:
    """(PSS, RSS) in bytes of these processes."""
    return (sum(_kb_field(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids),
            sum(_kb_field(f"/proc/{p}/status", "VmRSS:") for p in pids))


def task_trees(manager: McpManager) -> dict[tuple, list[int]]:
    """Each task's browser: its server's process tree."""
    trees = {}
    for run in manager.browsers.runs(SERVER):
        servers = pids_with_arg(str(run.folder / "output"))
        if servers:
            trees[run.task] = process_tree(servers[0])
    return trees


def ref(snapshot: str, role: str, name: str) -> str:
    found = re.findall(rf'- {role} "{re.escape(name)}"[^\n]*?\[ref=(\w+)\]', snapshot)
    if not found:
        raise SystemExit(f"no {role} {name!r} in the snapshot:\n{snapshot[:2000]}")
    return found[-1]


async def export_flow(manager: McpManager, task: tuple[str, str], app: AppX) -> None:
    """The export of tests/test_browser_mcp.py, as the planner makes it, on the task's own browser."""
    async def call(tool: str, **args: object) -> str:
        result = await manager.call_tool(SERVER, tool, args, task=task)
        text = result_text(result)
        if result.isError:
            raise SystemExit(f"{tool} failed: {text[:500]}")
        return text

    await call("browser_navigate", url=f"{app.url}/login")
    page = await call("browser_snapshot")
    await call("browser_type", element="User field", target=ref(page, "textbox", "User"), text=USER)
    await call("browser_type", element="Password field", target=ref(page, "textbox", "Password"), text=PASSWORD,
               submit=True)
    page = await call("browser_snapshot")
    await call("browser_click", element="Next page", target=ref(page, "link", "Next page"))
    page = await call("browser_snapshot")
    await call("browser_click", element="Export button", target=ref(page, "button", "Export all records"))


class PeakSampler:
    """The highest PSS of all the tasks' browsers together while they work (sampled every 50 ms)."""

    def __init__(self, manager: McpManager):
        self.manager = manager
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            pids = [p for tree in task_trees(self.manager).values() for p in tree]
            self.peak = max(self.peak, tree_memory(pids)[0])
            self.samples += 1

    def __enter__(self) -> "PeakSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def measure(manager: McpManager, apps: list[AppX], label: str) -> dict[str, float]:
    tasks = [(f"bench-{label}-{i}", "turn 1") for i in range(len(apps))]

    async def all_at_once() -> None:
        await asyncio.gather(*(export_flow(manager, t, a) for t, a in zip(tasks, apps)))

    started = time.perf_counter()
    with PeakSampler(manager) as sampler:
        run_sync(all_at_once())
    took = time.perf_counter() - started
    trees = task_trees(manager)
    if len(trees) != len(tasks):
        raise SystemExit(f"expected {len(tasks)} browsers, found {len(trees)}")
    pss, rss = tree_memory([p for tree in trees.values() for p in tree])
    processes = sum(len(t) for t in trees.values())
    everything = [p for tree in trees.values() for p in tree]
    started = time.perf_counter()
    for task in tasks:
        manager.browsers.release(SERVER, task)
    deadline = time.monotonic() + 60
    while any(alive(p) for p in everything) and time.monotonic() < deadline:
        time.sleep(0.05)
    closed = time.perf_counter() - started
    if any(alive(p) for p in everything):
        raise SystemExit(f"{label}: processes of closed browsers still run after 60 s")
    return {f"{label}: browsers": len(tasks), f"{label}: processes": processes,
            f"{label}: PSS after the export, MB": pss / MB, f"{label}: RSS after the export, MB": rss / MB,
            f"{label}: peak PSS during the export, MB": max(sampler.peak, pss) / MB,
            f"{label}: samples of the peak": sampler.samples,
            f"{label}: export flow, s": took, f"{label}: close, all processes gone, s": closed}


def main() -> int:
    if not CLI.is_file():
        fetched = subprocess.run([sys.executable, str(REPO / "scripts" / "fetch_npm_servers.py")])
        if fetched.returncode != 0 or not CLI.is_file():
            print("Playwright MCP could not be installed (npm): run `make test-corpus`", file=sys.stderr)
            return 1
    settings, base = isolated_settings()
    install_playwright(base / "mcp", CLI)
    flags = json.loads((REPO / "mcp" / "playwright.json").read_text())["browser"]["launchOptions"]["args"]
    heap_mb = int(next(f for f in flags if "max-old-space-size" in f).rsplit("=", 1)[1])
    renderers = int(next(f for f in flags if f.startswith("--renderer-process-limit")).rsplit("=", 1)[1])
    bound_mb = heap_mb * renderers

    manager = McpManager(settings)
    try:
        manager.ensure_started(wait_s=120)
        lister = pids_with_arg(str(settings.data_dir / "browser" / SERVER / "output"))
        lister_pss = tree_memory(process_tree(lister[0]))[0] if lister else 0
        with AppX() as one:
            figures = measure(manager, [one], "1 task")
        with AppX() as a, AppX() as b, AppX() as c:
            figures.update(measure(manager, [a, b, c], "3 tasks at once"))
    finally:
        manager.shutdown()
    one_mb = figures["1 task: peak PSS during the export, MB"]
    three_mb = figures["3 tasks at once: peak PSS during the export, MB"]
    print("[browser memory: one Playwright MCP server + Chromium per task, on app X]")
    print(f"  the server listing the tools (no browser), PSS MB: {lister_pss / MB:.1f}")
    for name, value in figures.items():
        print(f"  {name}: {value:.1f}" if isinstance(value, float) else f"  {name}: {value}")
    print(f"  bound set by mcp/playwright.json: V8 heap {heap_mb} MB x {renderers} renderers = {bound_mb} MB a browser")
    print(f"  3 tasks / 1 task (peak PSS): {three_mb / one_mb:.2f}")
    print(f"  ratio to the bound, 1 task: {one_mb / bound_mb:.3f}; 3 tasks: {three_mb / (3 * bound_mb):.3f} "
          "(no anchor in the issue: figures only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
