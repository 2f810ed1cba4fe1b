"""LangGraph's own server loads Jarvis's graph (`langgraph.json`, issue [18] item 4): `langgraph dev` with no
--allow-blocking, driven by the official SDK client: a plain turn, a tool turn, a confirmation resumed with the
README's shape."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, answer, tool_call
from orchestrator.storage import writer

LANGGRAPH = Path(sys.executable).parent / "langgraph"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# langgraph.json turns LANGGRAPH_STRICT_MSGPACK on: the platform's serializer cannot be told Jarvis's types, and
# without strict mode it rebuilds any class a checkpoint names (with a "Deserializing unregistered type" warning).
# Run once as a user would (not set) and once with it set by hand.
@pytest.fixture(params=[None, "true"], ids=["as-configured", "strict-set-by-hand"])
def dev_server(jarvis_env, tmp_path, request):
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli[inmem] is not installed (make install-dev)")
    port = _free_port()
    log = (tmp_path / "langgraph-dev.log").open("w")
    env = {**jarvis_env.env(), "NO_COLOR": "1", "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    env.pop("LANGGRAPH_STRICT_MSGPACK", None)
    if request.param is not None:
        env["LANGGRAPH_STRICT_MSGPACK"] = request.param
    # Its own working copy of langgraph.json: the dev server writes .langgraph_api/ in its working folder.
    work = tmp_path / "project"
    work.mkdir()
    shutil.copy(REPO / "langgraph.json", work / "langgraph.json")
    proc = subprocess.Popen([str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port),
                             "--config", str(work / "langgraph.json")], cwd=str(work), env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 90
    while True:
        try:
            client.assistants.search(graph_id="jarvis")
            break
        except Exception:  # noqa: BLE001 - not up yet
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("langgraph dev did not start:\n" + (tmp_path / "langgraph-dev.log").read_text()[-4000:])
            time.sleep(0.5)
    try:
        yield client, tmp_path / "langgraph-dev.log"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.mark.slow
def test_langgraph_dev_serves_the_graph_to_the_sdk(jarvis_env, dev_server):
    client, log_path = dev_server
    srv = jarvis_env.server
    (jarvis_env.root / "a.txt").write_text("x")
    target = jarvis_env.root / "note.txt"

    thread = client.threads.create()
    srv.push(answer("Hello from Jarvis."))
    out = client.runs.wait(thread["thread_id"], "jarvis", input={"messages": [{"role": "user", "content": "hi"}]})
    assert out["messages"][-1]["content"] == "Hello from Jarvis."

    srv.push(tool_call("fs_list_dir", path=str(jarvis_env.root)), answer("One file: a.txt."))
    out = client.runs.wait(thread["thread_id"], "jarvis",
                           input={"messages": [{"role": "user", "content": "what is in my folder?"}]})
    tool_messages = [m for m in out["messages"] if m["type"] == "tool"]
    assert "a.txt" in tool_messages[-1]["content"] and out["messages"][-1]["content"] == "One file: a.txt."

    srv.push(tool_call("fs_write_text", path=str(target), content="hi"), answer("Written."))
    client.runs.wait(thread["thread_id"], "jarvis", input={"messages": [{"role": "user", "content": "write hi"}]})
    state = client.threads.get_state(thread["thread_id"])
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    assert interrupts and interrupts[0]["value"]["tool"] == "fs_write_text", state
    assert not target.exists()
    _a_web_page_cannot_drive_it(client, thread["thread_id"], interrupts[0]["id"])
    assert not target.exists()
    out = client.runs.wait(thread["thread_id"], "jarvis",
                           command={"resume": {interrupts[0]["id"]: {"decision": "approve"}}})
    assert target.read_text() == "hi" and out["messages"][-1]["content"] == "Written."

    log = log_path.read_text()
    for bad in ("Blocking call", "BlockingError", "Deserializing unregistered type", "Traceback", "could not prune"):
        assert bad not in log, re.findall(rf".*{bad}.*", log)[:3]


def _a_web_page_cannot_drive_it(client, thread_id: str, interrupt_id: str) -> None:
    """`langgraph dev` answered any origin and any Host: a page on any site the user opened approved the write this
    thread waits for (a text/plain POST needs no CORS preflight), read every thread, or marked one trusted for
    good; a DNS name rebound to 127.0.0.1 reached it as well (orchestrator/platform_auth.py)."""
    import httpx

    base = str(client.http.client.base_url).rstrip("/")
    approve = '{"assistant_id": "jarvis", "command": {"resume": {"%s": {"decision": "approve"}}}}' % interrupt_id
    page = {"Origin": "https://evil.example", "Content-Type": "text/plain"}
    with httpx.Client(base_url=base, timeout=30) as http:
        for headers in (page, {**page, "x-auth-scheme": "langsmith"}, {"Host": "rebind.evil.example"}):
            assert http.post(f"/threads/{thread_id}/runs/wait", content=approve, headers=headers).status_code == 403
            assert http.post("/threads/search", content="{}", headers=headers).status_code == 403
            assert http.post(f"/threads/{thread_id}/state", content='{"values": {"trusted_after_turn": 99}}',
                             headers=headers).status_code == 403
        studio = http.post("/threads/search", json={}, headers={"Origin": "https://smith.langchain.com"})
        assert studio.status_code == 200 and any(t["thread_id"] == thread_id for t in studio.json())


# One server start is enough here: the routes checked do not depend on the serializer's strict mode.
@pytest.mark.slow
@pytest.mark.parametrize("dev_server", [None], indirect=True, ids=["as-configured"])
def test_the_platforms_own_routes_answer_no_web_page_and_no_foreign_host(dev_server):
    """The routes `langgraph dev` mounts itself are outside the auth handler: a page on any site wiped every thread
    (`POST /internal/truncate`, a text/plain POST needs no preflight), read one raw, or, from another port of this
    host, read the deploy set-up (`/deploy` trusts any localhost Origin). orchestrator/platform_http.py's
    middleware refuses them on every path; the user's own client (no Origin, Host localhost) is still answered."""
    import httpx

    client, _ = dev_server
    thread_id = client.threads.create()["thread_id"]
    base = str(client.http.client.base_url).rstrip("/")
    hostile = [
        {"Origin": "https://evil.example", "Content-Type": "text/plain"},
        {"Origin": "http://127.0.0.1:8000", "Content-Type": "text/plain"},  # a page of another local server
        {"Host": "rebind.evil.example"},
        {"Sec-Fetch-Site": "cross-site"},  # an <img>/<script> GET: no Origin
        {"Sec-Fetch-Site": "same-site"},
    ]
    with httpx.Client(base_url=base, timeout=30) as http:
        for headers in hostile:
            assert http.post("/internal/truncate", content="{}", headers=headers).status_code == 403, headers
            assert http.get(f"/internal/debug/thread/{thread_id}", headers=headers).status_code == 403, headers
            assert http.get("/deploy", headers=headers).status_code == 403, headers
            assert http.get("/info", headers=headers).status_code == 403, headers
            preflight = http.options("/threads/search", headers={**headers, "Access-Control-Request-Method": "POST"})
            assert preflight.status_code == 403, headers
        assert client.threads.get(thread_id)["thread_id"] == thread_id  # nothing was wiped
        assert http.get(f"/internal/debug/thread/{thread_id}").status_code == 200  # the user's own client
        studio = http.get("/info", headers={"Origin": "https://smith.langchain.com", "Sec-Fetch-Site": "cross-site"})
        assert studio.status_code == 200


def test_the_platform_graph_leaves_checkpoint_pruning_to_the_platform(jarvis_env, caplog):
    """Built without a checkpointer of its own (platform_graph.py), the graph must not trim Jarvis's checkpoint
    tables after a turn: the platform keeps its threads elsewhere (each turn logged "could not prune checkpoints
    ...: no such table: checkpoints")."""
    jarvis_env.server.push(answer("Hello."))
    graph = jarvis_env.app(checkpointer=False).graph
    with caplog.at_level(logging.WARNING):
        out = graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "platform-1"}})
        writer.flush()
    assert out["messages"][-1].content == "Hello."
    assert not [r for r in caplog.records if "prune" in r.getMessage()], caplog.text
