"""Jarvis's MCP server overhead: a read-only tool call (memory_search over a memory of 500 facts) by an MCP client
through the streamable HTTP endpoint of the real `jarvis run` app (warm: server up, one kept-alive connection, a
session opened once), against the same call through the ToolExecutor directly, as the MCP server itself makes it
(outside content, every argument untrusted). Floor: ratio <= 1.3, goal <= 1.1.

The client is another process (this file run with --client), so it measures the server, not a client contending
for the server's GIL: a plain HTTP connection posting, in the session it opened, the JSON-RPC `tools/call` the MCP
SDK's client would post. The bench tells it when to make each call over a pipe and reads back the time the call
took, measured in the client around the POST; the direct calls run here, interleaved with them one for one
(same tool, same arguments, same warm memory). Medians of CALLS calls; the CPU figures are the Jarvis process's
(server and its worker threads; the client's own is not in them).

Also timed in the same run, by the same client: the MCP SDK's own server alone (its low-level `Server` and
streamable HTTP session manager, JSON answers, on the same uvicorn settings) answering a tool that only hops to a
worker thread and back, as Jarvis's handler does: what the protocol, the HTTP round trip between two processes and
the hop cost before Jarvis does anything. `floor ratio` is (direct + that) / direct: the best the MCP path can get
to while the SDK speaks the protocol and the call leaves the event loop.

    python bench/mcp_server.py [CALLS]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from _common import isolated_settings, report

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 300
FACTS = 500
WORDS = ["dentist", "invoice", "Falcon", "piano", "garage", "passport", "Lisbon", "tax", "school", "boiler"]
ARGS = {"query": "dentist note for project 7"}


def client(url: str, token: str) -> None:
    """The MCP client's side: one session, then one `tools/call` per line read, its milliseconds written back. The
    standard library's HTTP connection, kept alive: the least a client can spend, so the time is the server's."""
    from http.client import HTTPConnection
    from urllib.parse import urlsplit

    where = urlsplit(url)
    conn = HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=30)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}

    def post(body: dict[str, Any]) -> tuple[int, dict[str, str], str]:
        conn.request("POST", "/mcp", json.dumps(body), headers)
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read().decode()

    _, opened, _ = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    headers["mcp-session-id"] = next(v for k, v in opened.items() if k.lower() == "mcp-session-id")
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    print("ready", flush=True)
    for line in sys.stdin:
        body = {"jsonrpc": "2.0", "id": int(line), "method": "tools/call",
                "params": {"name": "memory_search", "arguments": ARGS}}
        t0 = time.perf_counter()
        status, _, text = post(body)
        elapsed = (time.perf_counter() - t0) * 1000
        result = json.loads(text).get("result") or {} if status == 200 else {}
        if result.get("isError") or not result.get("content"):
            print(f"failed {status} {text[:500]}", flush=True)
            return
        print(f"{elapsed:.4f}", flush=True)


def main() -> None:
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
    executor = jarvis.runtime.executor

    def direct() -> None:
        ctx = CallContext(thread_id="mcp:bench:calls", key=f"bench|{uuid.uuid4().hex}", untrusted_seen=True,
                          origin="mcp", untrusted_args=list(ARGS.values()))
        outcome = executor.execute("memory_search", ARGS, ctx, confirm=lambda request: "deny")
        assert outcome.ok, outcome.content

    app = create_app(jarvis, services=[])
    with serve_in_thread(app) as url, sdk_alone() as through_sdk_alone:
        proc, through_mcp = start_client(url, token)

        def timed_direct() -> float:
            t0 = time.perf_counter()
            direct()
            return (time.perf_counter() - t0) * 1000

        for i in range(10):  # warm all three
            through_mcp(i)
            timed_direct()
            through_sdk_alone(i)
        samples: dict[str, list[float]] = {"mcp": [], "direct": [], "sdk": []}
        calls = {"mcp": through_mcp, "direct": lambda i: timed_direct(), "sdk": through_sdk_alone}
        order = list(calls)
        for i in range(CALLS):  # interleaved, each first in turn, so that background load hits all alike
            for which in order[i % 3:] + order[:i % 3]:
                samples[which].append(calls[which](i))
        mcp_cpu = cpu_ms(lambda i: through_mcp(i))
        direct_cpu = cpu_ms(lambda i: direct())
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    mcp_ms, direct_ms, sdk_ms = (statistics.median(samples[k]) for k in ("mcp", "direct", "sdk"))
    ratio = mcp_ms / direct_ms
    report("mcp_server", {"executor directly (ms)": direct_ms, "through Jarvis's MCP server, HTTP (ms)": mcp_ms,
                          "added by MCP (ms)": mcp_ms - direct_ms, "CPU, executor directly (ms)": direct_cpu,
                          "CPU of Jarvis's process, through MCP (ms)": mcp_cpu,
                          "CPU ratio": mcp_cpu / direct_cpu,
                          "MCP SDK alone, a tool that only hops to a thread (ms)": sdk_ms,
                          "floor ratio (direct + SDK alone) / direct": (direct_ms + sdk_ms) / direct_ms},
           ratio, "<= 1.3 (goal 1.1)", ratio <= 1.3)
    jarvis.close()


def start_client(url: str, token: str) -> tuple[subprocess.Popen[str], Callable[[int], float]]:
    """The client process (this file with --client) on `url`, and a function making its call number i."""
    proc = subprocess.Popen([sys.executable, __file__, "--client", url, token], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"

    def call(i: int) -> float:
        proc.stdin.write(f"{i}\n")  # type: ignore[union-attr]
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert not line.startswith("failed") and line.strip(), line
        return float(line)

    return proc, call


@contextmanager
def sdk_alone() -> Iterator[Callable[[int], float]]:
    """The MCP SDK's server alone, on the uvicorn settings `jarvis run` uses: a memory_search that answers a fixed
    text after a hop to a worker thread and back (anyio's, as Jarvis's handler makes it)."""
    import anyio
    from mcp import types
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from orchestrator.server.listen import bind_socket, uvicorn_server

    server: Server = Server("sdk-alone")
    text = "x" * 600  # about memory_search's answer here

    @server.list_tools()  # as Jarvis's: the SDK looks a called tool up in the list it keeps
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name="memory_search", inputSchema={"type": "object"})]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.TextContent]:
        return [types.TextContent(type="text", text=await anyio.to_thread.run_sync(lambda: text))]

    manager = StreamableHTTPSessionManager(app=server, json_response=True)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await manager.handle_request(scope, receive, send)
            return
        async with manager.run():
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
        await send({"type": "lifespan.shutdown.complete"})

    sock = bind_socket("127.0.0.1", 0)
    uvicorn = uvicorn_server(app)
    thread = threading.Thread(target=uvicorn.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not uvicorn.started:
        assert thread.is_alive(), "the SDK's server did not start"
        time.sleep(0.02)
    proc, call = start_client(f"http://127.0.0.1:{sock.getsockname()[1]}", "none")
    try:
        yield call
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        uvicorn.should_exit = True
        thread.join(timeout=15)
        sock.close()


def cpu_ms(fn: Callable[[int], object]) -> float:
    """CPU time of this process per call (the server and its threads run in it; the client does not), averaged:
    on a loaded machine the wall time of a call that hops between threads waits for the scheduler at each hop."""
    start = time.process_time()
    for i in range(CALLS):
        fn(i)
    return (time.process_time() - start) * 1000 / CALLS


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--client":
        client(sys.argv[2], sys.argv[3])
    else:
        main()
