"""Jarvis's MCP server overhead: a read-only tool call (memory_search over a memory of 500 facts) by an MCP client
through the streamable HTTP endpoint of the real `jarvis run` app (warm: server up, one kept-alive connection),
against the same call through the ToolExecutor directly, as the MCP server itself makes it (outside content,
every argument untrusted). Floor: ratio <= 1.3, goal <= 1.1.

The client side is a plain HTTP connection posting, in the session it opened, the JSON-RPC `tools/call` the MCP
SDK's client would post, so the figure is the server's cost, not a client library's. Both sides are
timed interleaved (bench/_common.py), medians of CALLS calls.

    python bench/mcp_server.py [CALLS]
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable

from _common import interleaved_medians, isolated_settings, report

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 300
FACTS = 500
WORDS = ["dentist", "invoice", "Falcon", "piano", "garage", "passport", "Lisbon", "tax", "school", "boiler"]


def main() -> None:
    import httpx

    from orchestrator.app import App
    from orchestrator.mcp_server.clients import ClientStore
    from orchestrator.memory.store import Provenance, SourceKind
    from orchestrator.server.app import create_app, serve_in_thread
    from orchestrator.tools.executor import CallContext

    settings, _ = isolated_settings(mcp_server={"enabled": True, "tools": ["memory_search"],
                                                "calls_per_minute": 1_000_000},
                                    models={"embeddings": {"base_url": "http://127.0.0.1:9/v1"}})  # keywords
    jarvis = App(settings)
    user = Provenance(SourceKind.USER, True, "bench")
    for i in range(FACTS):
        jarvis.memory.remember(f"Fact {i}: the {WORDS[i % len(WORDS)]} note number {i} for project {i % 37}", user,
                               about=f"Topic {i % 50}", kind="topic")
    token = ClientStore(settings).add("bench")
    args = {"query": "dentist note for project 7"}
    executor = jarvis.runtime.executor

    def direct(i: int) -> object:
        ctx = CallContext(thread_id="mcp:bench:calls", key=f"bench|{uuid.uuid4().hex}", untrusted_seen=True,
                          origin="mcp", untrusted_args=list(args.values()))
        outcome = executor.execute("memory_search", args, ctx, confirm=lambda request: "deny")
        assert outcome.ok, outcome.content
        return outcome

    app = create_app(jarvis, services=[])
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30, headers={
            "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18"}) as http:

        opened = http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        http.headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})

        def through_mcp(i: int) -> object:
            answer = http.post("/mcp", json={"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                             "params": {"name": "memory_search", "arguments": args}})
            assert answer.status_code == 200, answer.text
            result = answer.json()["result"]
            assert not result.get("isError"), result
            return result

        mcp_ms, direct_ms = interleaved_medians(through_mcp, direct, CALLS, warmup=10)
        mcp_cpu, direct_cpu = (cpu_ms(through_mcp), cpu_ms(direct))
    ratio = mcp_ms / direct_ms
    report("mcp_server", {"executor directly (ms)": direct_ms, "through Jarvis's MCP server, HTTP (ms)": mcp_ms,
                          "added by MCP (ms)": mcp_ms - direct_ms, "CPU, executor directly (ms)": direct_cpu,
                          "CPU, through MCP: client and server (ms)": mcp_cpu}, ratio, "<= 1.3 (goal 1.1)",
           ratio <= 1.3)
    jarvis.close()


def cpu_ms(fn: Callable[[int], object]) -> float:
    """CPU time of the whole process per call (the server runs in it), averaged: on a loaded machine the wall time
    of a call that hops between threads (client, server loop, worker) waits for the scheduler at each hop."""
    start = time.process_time()
    for i in range(CALLS):
        fn(i)
    return (time.process_time() - start) * 1000 / CALLS


if __name__ == "__main__":
    main()
