"""Helpers for the MCP tests: write a server's TOML file pointing at a test server module."""

from __future__ import annotations

import os
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from tests.conftest import REPO


def write_server(mcp_dir: Path, name: str, module: str, *args: str, **extra: Any) -> Path:
    mcp_dir.mkdir(parents=True, exist_ok=True)
    table: dict[str, Any] = {"command": sys.executable, "args": ["-m", module, *args], "cwd": str(REPO),
                             "timeout_s": 5, "startup_timeout_s": 20}
    table.update(extra)
    path = mcp_dir / f"{name}.toml"
    path.write_text(tomli_w.dumps(table), encoding="utf-8")
    return path


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def shutdown_mcp() -> None:
    """Stop every MCP server the test started (each App's manager; every live one is stopped)."""
    from orchestrator.mcp import manager as mcp_manager

    mcp_manager.shutdown_all()


def pids_with_arg(arg: str, under: int | None = None) -> list[int]:
    """The processes one of whose command-line arguments is exactly `arg` (a server's script, a browser's profile);
    with `under`, only those below that process: other test workers, and other users' runs, start the same script."""
    if under is not None:
        tree = set(process_tree(under))
        return [p for p in pids_with_arg(arg) if p in tree]
    wanted, pids = arg.encode(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in argv:
            pids.append(int(proc.name))
    return pids


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def process_tree(root: int) -> list[int]:
    """`root` and every process below it (from /proc: a browser server's node and its Chromium)."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            ppid = parent_of(int(proc.name))
            if ppid is not None:
                children.setdefault(ppid, []).append(int(proc.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def _stat(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return []


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def identities(pids: list[int]) -> dict[int, str]:
    """pid -> its start time: a process that ended is told from a new one that got its pid (pids wrap at 32768)."""
    return {pid: fields[19] for pid in pids if (fields := _stat(pid))}


def any_running(ids: dict[int, str]) -> bool:
    return any((fields := _stat(pid)) and fields[0] != "Z" and fields[19] == start for pid, start in ids.items())


def playwright_table(cli: Path, **browser: Any) -> dict[str, Any]:
    """The shipped mcp/playwright.toml with the package run from `cli` (.cache/npm) instead of npx (no download);
    `browser`: settings of its [browser] section changed (a test's short idle timeout)."""
    shipped = tomllib.loads((REPO / "mcp" / "playwright.toml").read_text())
    args = shipped["args"]
    pinned = next(a for a in args if a.startswith("@playwright/mcp@"))
    table = {**shipped, "command": "node", "args": [str(cli), *args[args.index(pinned) + 1:]]}
    if os.geteuid() == 0:  # Chromium's own sandbox does not run as root (containers)
        table["args"].append("--no-sandbox")
    table["timeout_s"] = 60
    table["browser"] = {**table["browser"], **browser}
    return table


def install_playwright(mcp_dir: Path, cli: Path, **browser: Any) -> None:
    mcp_dir.mkdir(parents=True, exist_ok=True)
    (mcp_dir / "playwright.toml").write_text(tomli_w.dumps(playwright_table(cli, **browser)), encoding="utf-8")
    (mcp_dir / "playwright.json").write_text((REPO / "mcp" / "playwright.json").read_text(), encoding="utf-8")
