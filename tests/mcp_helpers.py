"""Helpers for the MCP tests: write a server's TOML file pointing at a test server module."""

from __future__ import annotations

import sys
import time
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


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05):
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


def pids_with_arg(arg: str) -> list[int]:
    """The processes one of whose command-line arguments is exactly `arg` (a server's script, a browser's profile)."""
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


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False
