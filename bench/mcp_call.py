"""MCP call overhead: one tool call through Jarvis's ToolExecutor (catalog lookup, argument validation, policy,
the langchain-mcp-adapters tool, the hop to the background loop, the manager's long-lived session) against
the same call on a bare `mcp` ClientSession to the same server program. Target: ratio <= 1.2.
Jarvis's session (orchestrator/mcp/session.py) compiles each tool's output-schema check once where the bare SDK
session re-checks the schema on every call, so Jarvis can come out faster than the bare session; the layers
above the session (catalog, validation, policy, LangChain tool, adapter) are printed on their own line, measured
against a call on that same session through the manager.
Also: start-up of three servers at once (the manager starts them in parallel) against starting them one
after another on bare sessions."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

CALLS = 300
ROUNDS = 3
ECHO = ["-m", "tests.fakes.mcp_test_server", "--only", "echo"]
THREE = {
    "echo": ECHO,
    "time": None,  # mcp-server-time (the published server of the tests)
    "phone": ["-m", "tests.fakes.fake_adb_mcp"],
}


def _params(args: list[str] | None, state: Path) -> StdioServerParameters:
    if args is None:
        return StdioServerParameters(command=str(Path(sys.executable).parent / "mcp-server-time"),
                                     args=["--local-timezone", "UTC"], cwd=str(REPO))
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(REPO),
                                 env={"FAKE_PHONE_STATE": str(state)})


async def bare_calls(n: int) -> list[float]:
    times = []
    async with stdio_client(_params(ECHO, Path("/dev/null")), errlog=open("/dev/null", "w")) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            await s.call_tool("echo", {"text": "warm"})
            for i in range(n):
                t0 = time.perf_counter()
                await s.call_tool("echo", {"text": f"hello {i}"})
                times.append(time.perf_counter() - t0)
    return times


async def bare_sequential_start(state: Path) -> float:
    t0 = time.perf_counter()
    for args in THREE.values():
        async with stdio_client(_params(args, state), errlog=open("/dev/null", "w")) as (r, w):
            async with ClientSession(r, w) as s:
                await s.initialize()
                await s.list_tools()
    return time.perf_counter() - t0


def main() -> None:
    import tomli_w

    from orchestrator.app import App
    from orchestrator.core.config import settings_from_dict
    from orchestrator.tools.executor import CallContext, ToolExecutor
    from orchestrator.core.aio import run_sync
    from orchestrator.mcp.manager import shutdown_all

    home = Path(tempfile.mkdtemp(prefix="jarvis-bench-mcp-"))
    state = home / "phone.json"
    (home / "mcp").mkdir()
    for name, args in THREE.items():
        p = _params(args, state)
        table = {"command": p.command, "args": p.args, "cwd": str(REPO), "env": p.env or {}}
        (home / "mcp" / f"{name}.toml").write_text(tomli_w.dumps(table))
    settings = settings_from_dict({"storage": {"data_dir": str(home / "data")}, "mcp": {"dir": str(home / "mcp")},
                                   "fs": {"roots": [str(home)]}}, home)

    # start-up: three servers in parallel through the manager
    t0 = time.perf_counter()
    app = App(settings)
    manager = app.mcp_manager
    manager.ensure_started(wait_s=120)
    parallel = time.perf_counter() - t0
    states = {s.name: s.state for s in manager.status()}
    assert set(states.values()) == {"ready"}, states
    sequential = asyncio.run(bare_sequential_start(state))

    catalog = app.catalog
    executor = ToolExecutor(settings, catalog)
    ctx = CallContext(thread_id="bench", key="bench")
    assert executor.execute("echo", {"text": "warm"}, ctx, confirm=lambda r: "deny").content == "warm"

    async def session_path(n: int) -> list[float]:
        """The manager's call on the same long-lived session: what Jarvis's layers sit on."""
        times = []
        for i in range(n):
            t = time.perf_counter()
            await manager.call_tool("echo", "echo", {"text": f"hello {i}"})
            times.append(time.perf_counter() - t)
        return times

    jarvis_medians, bare_medians, session_medians = [], [], []
    for _ in range(ROUNDS):  # interleaved, so machine noise hits every side alike
        times = []
        for i in range(CALLS):
            t = time.perf_counter()
            out = executor.execute("echo", {"text": f"hello {i}"}, ctx, confirm=lambda r: "deny")
            times.append(time.perf_counter() - t)
        assert out.ok and out.content == f"hello {CALLS - 1}", out.content
        jarvis_medians.append(statistics.median(times))
        session_medians.append(statistics.median(run_sync(session_path(CALLS))))
        bare_medians.append(statistics.median(asyncio.run(bare_calls(CALLS))))
    shutdown_all()

    jarvis_ms = statistics.median(jarvis_medians) * 1000
    bare_ms = statistics.median(bare_medians) * 1000
    session_ms = statistics.median(session_medians) * 1000
    ratio = jarvis_ms / bare_ms
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"one MCP tool call, median of {ROUNDS}x{CALLS} (load average {load:.1f} on {os.cpu_count()} cores):")
    print(f"  Jarvis executor, sync (graph.invoke; hops to the session loop) {jarvis_ms:.2f} ms")
    print(f"  the same call on Jarvis's session through the manager           {session_ms:.2f} ms")
    print(f"  bare mcp ClientSession                                          {bare_ms:.2f} ms")
    print(f"ratio Jarvis / bare session: {ratio:.2f} (target <= 1.2) {'OK' if ratio <= 1.2 else 'OVER TARGET'}")
    print(f"Jarvis's layers above its session: {jarvis_ms - session_ms:+.2f} ms "
          f"(ratio {jarvis_ms / session_ms:.2f} against its own session)")
    print(f"start-up of three servers (echo, mcp-server-time, phone): {parallel:.2f} s in parallel through the "
          f"manager, {sequential:.2f} s one after another on bare sessions (ratio {parallel / sequential:.2f})")


if __name__ == "__main__":
    main()
