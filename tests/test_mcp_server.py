"""Jarvis as an MCP server, driven by the MCP Python SDK 2.x's own client (tests/fakes/mcp_sdk_client.py, run in the
virtualenv scripts/fetch_pypi_servers.py makes: a client nobody here wrote, of the SDK generation Jarvis does not
use) over both transports: streamable HTTP under the real `jarvis run` app on a socket, and stdio from a real
`jarvis mcp serve` process the client starts; and by the MCP Inspector's command-line mode (npm, pinned, fetched with
the npm servers) over both. The model is the scripted server (tests/fakes/llm_server.py).

What it proves: a client lists the offered tools, searches memory, asks Jarvis a question; a write a client asks for
waits for the user's approval in Jarvis and runs once after the user approves through Jarvis's own API; and the
hostile cases: a tool not offered, arguments outside the schema, a client answering its own confirmation, another
client's pending id, a wrong or revoked token, a page on another origin, a DNS-rebinding Host, a flood.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import JARVIS_BIN, REPO, JarvisEnv, answer, tool_call
from tests.ui_server import UIServer, start_ui

CLIENT_SCRIPT = REPO / "tests" / "fakes" / "mcp_sdk_client.py"
MCP_VENVS = Path(os.environ.get("JARVIS_TEST_MCP_VENVS") or REPO / ".cache" / "mcp-venvs")
SDK_PYTHON = MCP_VENVS / "sdk-client" / "bin" / "python"
NPM = Path(os.environ.get("JARVIS_TEST_NPM") or REPO / ".cache" / "npm") / "node_modules"
INSPECTOR = NPM / ".bin" / "mcp-inspector"
OFFERED = ["memory_search", "ask_jarvis", "jarvis_status", "fs_write_text"]


def sdk_client(transport: dict[str, Any], steps: list[list[Any]], timeout: float = 180) -> dict[str, Any]:
    if not SDK_PYTHON.exists():
        pytest.fail(f"the MCP SDK 2.x client is not in {SDK_PYTHON.parent.parent}: run `make test-corpus`")
    proc = subprocess.run([str(SDK_PYTHON), str(CLIENT_SCRIPT), json.dumps(transport), json.dumps(steps)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["sdk"].startswith("2."), out
    return out


def results(out: dict[str, Any]) -> list[Any]:
    assert "results" in out, out
    return out["results"]


def pending_id(text: str) -> str:
    assert "pending_id=" in text, text
    return text.split("pending_id=", 1)[1].split()[0]


@pytest.fixture
def mcp_env(jarvis_env: JarvisEnv) -> JarvisEnv:
    jarvis_env.write_config(mcp_server={"enabled": True, "tools": OFFERED, "calls_per_minute": 30, "wait_s": 30})
    return jarvis_env


def add_client(env: JarvisEnv, name: str) -> str:
    from orchestrator.mcp_server.clients import ClientStore

    return ClientStore(env.settings).add(name)


@pytest.fixture
def served(mcp_env: JarvisEnv) -> Iterator[UIServer]:
    with start_ui(mcp_env) as server:
        yield server


def http(server: UIServer, token: str, **extra: str) -> dict[str, Any]:
    return {"url": f"{server.url}/mcp", "token": token, **extra}


def remember_dentist(server: UIServer) -> None:
    from orchestrator.memory.store import Provenance, SourceKind

    server.app.state.jarvis.app.memory.remember("Bob's dentist is Dr Lee on Elm Street",
                                                Provenance(SourceKind.USER, True, "thread t"), about="Bob",
                                                kind="person")


def test_http_client_lists_searches_and_asks(served: UIServer, mcp_env: JarvisEnv) -> None:
    token = add_client(mcp_env, "claude")
    remember_dentist(served)
    mcp_env.server.push(answer("Bob's dentist is Dr Lee."))
    out = results(sdk_client(http(served, token), [
        ["list_tools"],
        ["call", "memory_search", {"query": "dentist"}],
        ["call", "ask_jarvis", {"question": "Who is Bob's dentist?", "thread": "q1"}],
        ["list_resources"],
        ["read", "jarvis://memory/1"],
        ["read", "jarvis://memory/999"],
        ["read", "file:///etc/passwd"],
        ["call", "ask_jarvis", {"question": "hi", "thread": "calls"}],
    ]))
    assert sorted(t["name"] for t in out[0]) == sorted(OFFERED)
    assert not out[4]["error"] and "Elm Street" in out[4]["text"]
    assert out[5]["error"] and out[6]["error"] and out[7]["error"]
    assert not out[1]["error"] and "Dr Lee" in out[1]["text"]
    assert out[2] == {"error": False, "text": "Bob's dentist is Dr Lee."}
    assert any(r["uri"].startswith("jarvis://memory/") for r in out[3])
    # the client's question reached the model as the message of a thread of its own, tainted from the start
    state = served.app.state.jarvis.app.graph.get_state({"configurable": {"thread_id": "mcp:claude:q1"}}).values
    assert state["untrusted_turn"] == state["turn"] == 1
    from orchestrator.mcp_server.clients import ClientStore

    rows = {c.name: c for c in ClientStore(mcp_env.settings).list()}
    assert rows["claude"].calls == 6  # its tool calls and resource reads, recorded for `jarvis mcp clients`
    # and in the runs view, under the client's threads: the direct search, and the turn it asked for
    from orchestrator.storage import writer

    writer.flush()
    runs = served.client().get("/api/runs").json()
    threads = {r["thread_id"] for r in runs}
    assert {"mcp:claude:calls", "mcp:claude:q1"} <= threads, threads
    assert [r["tool_calls"] for r in runs if r["thread_id"] == "mcp:claude:calls"] == [1]


def test_a_write_asked_by_a_client_waits_for_the_user_in_jarvis_and_runs_once(served: UIServer,
                                                                            mcp_env: JarvisEnv) -> None:
    token = add_client(mcp_env, "cursor")
    target = mcp_env.root / "note.txt"
    # the client's model asks Jarvis to write; Jarvis's model calls fs_write_text, which would run unasked in a
    # thread the user wrote in (fs_write is auto here): the client's words make it ask
    mcp_env.write_config(mcp_server={"enabled": True, "tools": OFFERED, "wait_s": 30},
                         autonomy={"effects": {"fs_write": "auto"}})
    with start_ui(mcp_env) as server:
        mcp_env.server.push(tool_call("fs_write_text", path=str(target), content="hello from cursor"),
                            answer("Written."))
        first = results(sdk_client(http(server, token), [
            ["call", "ask_jarvis", {"question": "Write hello into note.txt", "thread": "w"}]]))[0]
        assert not first["error"] and first["text"].startswith("Waiting for your approval in Jarvis"), first
        pid = pending_id(first["text"])
        assert not target.exists()
        # the client tries to answer its own confirmation: by a message to the waiting thread, by a tool no one
        # offered, by the status tool; none of them answers it
        tries = results(sdk_client(http(server, token), [
            ["call", "ask_jarvis", {"question": "approve", "thread": "w"}],
            ["call", "jarvis_approve", {"pending_id": pid}],
            ["call", "jarvis_status", {"pending_id": pid}],
        ]))
        assert tries[0]["error"] and "only the user answers it" in tries[0]["text"]
        assert tries[1]["error"] and "not offered" in tries[1]["text"]
        assert not tries[2]["error"] and tries[2]["text"].startswith("Waiting for your approval in Jarvis")
        assert not target.exists()
        # the user approves in Jarvis, through its own API (the UI's token, not the client's)
        asked = server.client().get(f"/api/threads/{pid}/pending").json()
        assert [a["tool"] for a in asked] == ["fs_write_text"]
        server.stream(f"/api/threads/{pid}/resume", {"decisions": {asked[0]["interrupt_id"]: {"decision": "approve"}}})
        assert target.read_text() == "hello from cursor"
        done = results(sdk_client(http(server, token), [["call", "jarvis_status", {"pending_id": pid}]]))[0]
        assert done == {"error": False, "text": "Written."}
        # it ran once: one entry in the effects ledger
        from orchestrator.tools.ledger import EffectsLedger

        assert EffectsLedger(mcp_env.settings).count_for_thread(pid) == 1


def test_a_direct_tool_call_that_must_ask_is_asked_in_jarvis_and_runs_once(served: UIServer,
                                                                         mcp_env: JarvisEnv) -> None:
    token = add_client(mcp_env, "vscode")
    target = mcp_env.root / "direct.txt"
    mcp_env.server.push(answer("Done: the file is written."))
    first = results(sdk_client(http(served, token), [
        ["call", "fs_write_text", {"path": str(target), "content": "direct"}]]))[0]
    assert first["text"].startswith("Waiting for your approval in Jarvis"), first
    pid = pending_id(first["text"])
    assert pid.startswith("mcp:vscode:call-") and not target.exists()
    # it waits where every confirmation of Jarvis waits: the UI's list of what waits for the user
    assert pid in {p["thread_id"] for p in served.client().get("/api/pending").json()}
    asked = served.client().get(f"/api/threads/{pid}/pending").json()
    served.stream(f"/api/threads/{pid}/resume", {"decisions": {asked[0]["interrupt_id"]: {"decision": "approve"}}})
    assert target.read_text() == "direct"
    done = results(sdk_client(http(served, token), [["call", "jarvis_status", {"pending_id": pid}]]))[0]
    assert "direct.txt" in done["text"] and "Done: the file is written." in done["text"]


def test_a_direct_write_handed_over_to_a_thread_still_asks_with_the_write_on_auto(mcp_env: JarvisEnv) -> None:
    """A client calls a write directly with fs_write on auto: the client's arguments are outside content, so the
    call asks, and the thread it is handed over to is tainted from its first step: the write waits for the user
    there too instead of running unasked."""
    token = add_client(mcp_env, "zed")
    target = mcp_env.root / "auto.txt"
    mcp_env.write_config(mcp_server={"enabled": True, "tools": OFFERED, "wait_s": 30},
                         autonomy={"effects": {"fs_write": "auto"}})
    with start_ui(mcp_env) as server:
        mcp_env.server.push(answer("Done."))
        first = results(sdk_client(http(server, token), [
            ["call", "fs_write_text", {"path": str(target), "content": "from zed"}]]))[0]
        assert first["text"].startswith("Waiting for your approval in Jarvis"), first
        assert not target.exists()
        pid = pending_id(first["text"])
        assert [a["tool"] for a in server.client().get(f"/api/threads/{pid}/pending").json()] == ["fs_write_text"]


def test_hostile_clients_are_refused(served: UIServer, mcp_env: JarvisEnv) -> None:
    mine = add_client(mcp_env, "mine")
    other = add_client(mcp_env, "other")
    mcp_env.server.push(tool_call("fs_write_text", path=str(mcp_env.root / "x.txt"), content="x"), answer("ok"))
    waiting = results(sdk_client(http(served, mine), [
        ["call", "ask_jarvis", {"question": "write x", "thread": "secret"}],
        ["call", "fs_read_text", {"path": "/etc/passwd"}],  # a tool not offered
        ["call", "memory_search", {"query": ["not", "a", "string"]}],  # arguments outside the schema
        ["call", "ask_jarvis", {"question": "hi", "thread": "../../jorb:x"}],
    ]))
    pid = pending_id(waiting[0]["text"])
    assert waiting[1]["error"] and "not offered" in waiting[1]["text"]
    assert waiting[2]["error"] and "validation" in waiting[2]["text"].lower()
    assert waiting[3]["error"]
    # another client's token reaches neither this client's pending call nor its thread
    theirs = results(sdk_client(http(served, other), [["call", "jarvis_status", {"pending_id": pid}]]))[0]
    assert theirs["error"] and "no call of yours" in theirs["text"]

    # nor the session this client opened: the SDK serves a session only to the client that opened it
    with httpx.Client(base_url=served.url, timeout=30,
                      headers={"Accept": "application/json, text/event-stream"}) as c:
        opened = c.post("/mcp", headers={"Authorization": f"Bearer {mine}"}, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert c.post("/mcp", json=ping, headers={**session, "Authorization": f"Bearer {mine}"}).status_code == 200
        assert c.post("/mcp", json=ping, headers={**session, "Authorization": f"Bearer {other}"}).status_code == 404

    from orchestrator.mcp_server.clients import ClientStore

    ClientStore(mcp_env.settings).revoke("other")
    with httpx.Client(base_url=served.url, timeout=30) as c:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        assert c.post("/mcp", json=body, headers={**accept, "Authorization": f"Bearer {other}"}).status_code == 401
        assert c.post("/mcp", json=body, headers={**accept, "Authorization": "Bearer nope"}).status_code == 401
        assert c.post("/mcp", json=body, headers={**accept, "Authorization": f"Bearer {served.token}"}).status_code == 401
        # a page on another origin, with a valid token (a browser would not send it, but a leaked one)
        assert c.post("/mcp", json=body, headers={**accept, "Authorization": f"Bearer {mine}",
                                                   "Origin": "http://evil.example"}).status_code == 403
        assert c.post("/mcp", json=body, headers={**accept, "Authorization": f"Bearer {mine}",
                                                   "Sec-Fetch-Site": "cross-site"}).status_code == 403
        # DNS rebinding: evil.example resolving to 127.0.0.1, its Host header names it
        assert c.post("/mcp", json=body, headers={**accept, "Authorization": f"Bearer {mine}",
                                                   "Host": "evil.example"}).status_code == 421
    refused = sdk_client(http(served, mine, origin="http://evil.example"), [["list_tools"]])
    assert "failed" in refused


def test_a_flood_from_one_client_is_cut_and_another_client_goes_on(mcp_env: JarvisEnv) -> None:
    mcp_env.write_config(mcp_server={"enabled": True, "tools": OFFERED, "calls_per_minute": 5})
    loud, calm = add_client(mcp_env, "loud"), add_client(mcp_env, "calm")
    with start_ui(mcp_env) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}

        def post(token: str) -> int:
            return c.post("/mcp", json=body, headers={"Accept": "application/json, text/event-stream",
                                                      "Authorization": f"Bearer {token}"}).status_code

        codes = [post(loud) for _ in range(20)]
        assert codes[:5] == [200] * 5 and set(codes[5:]) == {429}
        assert post(calm) == 200


def test_stdio_client_lists_searches_and_asks(mcp_env: JarvisEnv) -> None:
    token = add_client(mcp_env, "desktop")
    from orchestrator.memory.store import Provenance, SourceKind

    app = mcp_env.app()
    app.memory.remember("Bob's dentist is Dr Lee on Elm Street", Provenance(SourceKind.USER, True, "t"), about="Bob",
                        kind="person")
    app.close()
    mcp_env.server.push(answer("Dr Lee, on Elm Street."))
    env = {**mcp_env.env(), "JARVIS_MCP_TOKEN": token}
    out = results(sdk_client({"command": [str(JARVIS_BIN), "mcp", "serve"], "env": env}, [
        ["list_tools"],
        ["call", "memory_search", {"query": "dentist"}],
        ["call", "ask_jarvis", {"question": "Where is Bob's dentist?"}],
        ["call", "nope", {}],
    ]))
    assert sorted(t["name"] for t in out[0]) == sorted(OFFERED)
    assert "Dr Lee" in out[1]["text"]
    assert out[2] == {"error": False, "text": "Dr Lee, on Elm Street."}
    assert out[3]["error"]


def test_stdio_serve_refuses_a_revoked_or_missing_token(mcp_env: JarvisEnv) -> None:
    from orchestrator.mcp_server.clients import ClientStore

    token = add_client(mcp_env, "gone")
    ClientStore(mcp_env.settings).revoke("gone")
    for value in (token, ""):
        proc = subprocess.run([str(JARVIS_BIN), "mcp", "serve"], env={**mcp_env.env(), "JARVIS_MCP_TOKEN": value},
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode != 0 and "no client's token" in proc.stderr


def test_clients_cli_add_list_revoke_and_print_config(mcp_env: JarvisEnv) -> None:
    added = mcp_env.cli("mcp", "clients", "add", "goose", check=True)
    config = json.loads(added.stdout)["mcpServers"]
    token = config["jarvis"]["headers"]["Authorization"].split()[1]
    assert config["jarvis-stdio"]["env"]["JARVIS_MCP_TOKEN"] == token
    assert config["jarvis"]["url"].endswith("/mcp")
    stored = (mcp_env.data / "mcp_clients.json").read_text()
    assert token not in stored and "goose" in stored  # kept as a digest only
    assert (mcp_env.data / "mcp_clients.json").stat().st_mode & 0o077 == 0
    assert "goose" in mcp_env.cli("mcp", "clients", "list", check=True).stdout
    renewed = json.loads(mcp_env.cli("mcp", "serve", "--print-config", "--client", "goose", check=True).stdout)
    assert renewed["mcpServers"]["jarvis"]["headers"]["Authorization"] != f"Bearer {token}"
    mcp_env.cli("mcp", "clients", "revoke", "goose", check=True)
    assert "goose" not in mcp_env.cli("mcp", "clients", "list", check=True).stdout
    assert mcp_env.cli("mcp", "clients", "add", "Not A Name").returncode != 0


def test_off_by_default(jarvis_env: JarvisEnv) -> None:
    with start_ui(jarvis_env) as server, server.client() as c:
        assert c.post("/mcp", json={}).status_code == 404
    proc = subprocess.run([str(JARVIS_BIN), "mcp", "serve"], env={**jarvis_env.env(), "JARVIS_MCP_TOKEN": "x"},
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0 and "mcp_server.enabled" in proc.stderr


def test_client_words_are_not_the_users_for_argument_provenance() -> None:
    from langchain_core.messages import HumanMessage

    from orchestrator.tools.provenance import outside_words, sources_from_messages

    sources = sources_from_messages([HumanMessage("mail bob@example.org"), outside_words("mail eve@evil.example", "c")],
                                    lambda name: True, True)
    assert any("bob@example.org" in w for w in sources.words)
    assert not any("eve@evil.example" in w for w in sources.words)



def inspector(*args: str, env: dict[str, str] | None = None) -> Any:
    """The MCP Inspector's command-line mode (npm, pinned: scripts/fetch_npm_servers.py): one method, its JSON."""
    if not INSPECTOR.exists():
        pytest.fail(f"the MCP Inspector is not in {NPM}: run `make test-corpus`")
    # The Inspector gives a server 15 s to connect by default; `jarvis mcp serve`, a fresh interpreter, needed more
    # on a loaded machine: the bound is the subprocess's, not the Inspector's.
    proc = subprocess.run([str(INSPECTOR), "--cli", "--connect-timeout", "170000", *args], capture_output=True,
                          text=True, timeout=180, env=env,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads(proc.stdout)


def test_the_mcp_inspector_lists_searches_and_asks_over_both_transports(served: UIServer, mcp_env: JarvisEnv) -> None:
    token = add_client(mcp_env, "inspector")
    remember_dentist(served)
    mcp_env.server.push(answer("Dr Lee."), answer("Dr Lee, Elm Street."))
    over_http = [f"{served.url}/mcp", "--header", f"Authorization: Bearer {token}"]
    listed = inspector(*over_http, "--method", "tools/list")
    assert sorted(t["name"] for t in listed["tools"]) == sorted(OFFERED)
    found = inspector(*over_http, "--method", "tools/call", "--tool-name", "memory_search", "--tool-arg", "query=dentist")
    assert "Dr Lee" in found["content"][0]["text"]
    asked = inspector(*over_http, "--method", "tools/call", "--tool-name", "ask_jarvis",
                      "--tool-arg", "question=Who is Bob's dentist?")
    assert asked["content"][0]["text"] == "Dr Lee." and not asked.get("isError")
    env = {**mcp_env.env(), "JARVIS_MCP_TOKEN": token}
    over_stdio = ["-e", f"JARVIS_CONFIG={env['JARVIS_CONFIG']}", "-e", f"JARVIS_MCP_TOKEN={token}",
                  "-e", f"PYTHONPATH={env['PYTHONPATH']}"]
    serve = ["--", str(JARVIS_BIN), "mcp", "serve"]  # the Inspector starts it, as a desktop client would
    listed = inspector(*over_stdio, "--method", "tools/list", *serve, env=env)
    assert sorted(t["name"] for t in listed["tools"]) == sorted(OFFERED)
    found = inspector(*over_stdio, "--method", "tools/call", "--tool-name", "memory_search", "--tool-arg", "query=dentist",
                      *serve, env=env)
    assert "Dr Lee" in found["content"][0]["text"]
    asked = inspector(*over_stdio, "--method", "tools/call", "--tool-name", "ask_jarvis",
                      "--tool-arg", "question=Where?", "--tool-arg", "thread=stdio", *serve, env=env)
    assert asked["content"][0]["text"] == "Dr Lee, Elm Street."
    refused = subprocess.run([str(INSPECTOR), "--cli", *over_http[:1], "--header", "Authorization: Bearer wrong",
                              "--method", "tools/list"], capture_output=True, text=True, timeout=180)
    assert refused.returncode != 0


def test_over_stdio_a_write_waits_and_the_user_approves_it_from_another_process(mcp_env: JarvisEnv) -> None:
    token = add_client(mcp_env, "desk")
    target = mcp_env.root / "from-stdio.txt"
    mcp_env.server.push(tool_call("fs_write_text", path=str(target), content="via stdio"), answer("Written."))
    serve = {"command": [str(JARVIS_BIN), "mcp", "serve"], "env": {**mcp_env.env(), "JARVIS_MCP_TOKEN": token}}
    first = results(sdk_client(serve, [["call", "ask_jarvis", {"question": "write it", "thread": "w"}]]))[0]
    assert first["text"].startswith("Waiting for your approval in Jarvis"), first
    pid = pending_id(first["text"])
    assert not target.exists()
    # the user answers with Jarvis's own CLI, in another process; the client's next session reads the outcome
    mcp_env.cli("approve", pid, "--all", check=True)
    assert target.read_text() == "via stdio"
    done = results(sdk_client(serve, [["call", "jarvis_status", {"pending_id": pid}]]))[0]
    assert done == {"error": False, "text": "Written."}


def test_clients_added_and_revoked_in_settings_through_the_ui_api(served: UIServer) -> None:
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ui", "version": "1"}}}
    with served.client() as ui, httpx.Client(base_url=served.url, timeout=30) as other:
        made = ui.post("/api/mcp/clients", json={"name": "zed"})
        assert made.status_code == 200, made.text
        entry = made.json()["config"]["mcpServers"]["jarvis"]
        assert entry["url"] == f"{served.url}/mcp"  # the port this server is bound to
        token = entry["headers"]["Authorization"].split()[1]

        def mcp(with_token: str) -> int:
            return other.post("/mcp", json=initialize, headers={"Authorization": f"Bearer {with_token}",
                                                                "Accept": "application/json, text/event-stream"}).status_code

        assert mcp(token) == 200
        assert [c["name"] for c in ui.get("/api/mcp/clients").json()["clients"]] == ["zed"]
        # the client's token is not the UI's: it manages nothing
        assert other.post("/api/mcp/clients", json={"name": "evil"},
                          headers={"Authorization": f"Bearer {token}"}).status_code == 401
        assert ui.post("/api/mcp/clients", json={"name": "zed"}).status_code == 400  # taken
        assert ui.delete("/api/mcp/clients/zed").status_code == 200
        assert mcp(token) == 401
        assert ui.delete("/api/mcp/clients/zed").status_code == 404


def test_a_client_revoked_while_its_stdio_server_runs_gets_nothing_more(mcp_env: JarvisEnv, tmp_path) -> None:
    from orchestrator.mcp_server.clients import ClientStore

    token = add_client(mcp_env, "brief")
    ready, go = tmp_path / "ready", tmp_path / "go"
    serve = {"command": [str(JARVIS_BIN), "mcp", "serve"], "env": {**mcp_env.env(), "JARVIS_MCP_TOKEN": token}}
    steps = [["call", "memory_search", {"query": "x"}], ["touch", str(ready)], ["wait_for", str(go), 120],
             ["call", "memory_search", {"query": "x"}]]
    client = subprocess.Popen([str(SDK_PYTHON), str(CLIENT_SCRIPT), json.dumps(serve), json.dumps(steps)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and client.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), client.communicate(timeout=30)
        ClientStore(mcp_env.settings).revoke("brief")
        go.touch()
        out, err = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
    first, second = json.loads(out.strip().splitlines()[-1])["results"]
    assert not first["error"]
    assert second["error"] and "revoked" in second["text"]


def test_documents_are_resources_and_none_is_given_when_the_user_offers_none(mcp_env: JarvisEnv) -> None:
    from orchestrator.docs_index.files import add_paths

    token = add_client(mcp_env, "reader")
    note = mcp_env.root / "boiler.txt"
    note.write_text("The boiler was serviced on 3 March by Heatwise; the next service is due in March.\n")
    with start_ui(mcp_env) as server:
        index = server.app.state.jarvis.app.docs_index
        add_paths(index, [note])
        (doc,) = index.documents()
        out = results(sdk_client(http(server, token), [
            ["list_resources"], ["read", f"jarvis://documents/{doc.id}"], ["read", f"jarvis://documents/{doc.id + 7}"]]))
        assert f"jarvis://documents/{doc.id}" in {r["uri"] for r in out[0]}
        assert not out[1]["error"] and "serviced on 3 March by Heatwise" in out[1]["text"]
        assert out[2]["error"]
    # the user offers no resources: none is listed, and the same document is refused by its address
    mcp_env.write_config(mcp_server={"enabled": True, "tools": OFFERED, "resources": False})
    with start_ui(mcp_env) as server:
        out = results(sdk_client(http(server, token), [["list_resources"], ["read", f"jarvis://documents/{doc.id}"]]))
        assert out[0] == [] and out[1]["error"] and "Heatwise" not in out[1]["text"]


def test_jorb_create_offered_asks_the_user_in_jarvis_and_the_jorb_is_tainted_by_the_client(mcp_env: JarvisEnv) -> None:
    mcp_env.write_config(mcp_server={"enabled": True, "tools": [*OFFERED, "jorb_create"], "wait_s": 30})
    token = add_client(mcp_env, "agent")
    with start_ui(mcp_env) as server:
        jarvis = server.app.state.jarvis.app
        out = results(sdk_client(http(server, token), [
            ["list_tools"],
            ["call", "jorb_create", {"name": "Find a plumber", "plan": "Ask three plumbers for a quote by Friday."}]]))
        assert "jorb_create" in {t["name"] for t in out[0]}
        # starting a jorb is an effect: Jarvis's policy asks the user (in Jarvis), nothing is created before
        assert out[1]["text"].startswith("Waiting for your approval in Jarvis"), out[1]
        pid = pending_id(out[1]["text"])
        assert jarvis.jorbs.list() == []
        asked = server.client().get(f"/api/threads/{pid}/pending").json()
        assert [a["tool"] for a in asked] == ["jorb_create"]
        mcp_env.server.push(answer("Started."))
        server.stream(f"/api/threads/{pid}/resume", {"decisions": {asked[0]["interrupt_id"]: {"decision": "approve"}}})
        (row,) = jarvis.jorbs.list()
        assert row.name == "Find a plumber" and row.origin_thread == pid
        # its plan is the client's words: the jorb starts as one that read outside content, its effects ask first
        deadline = time.monotonic() + 60
        while (state := jarvis.jorbs.view(row.id).state) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert state is not None and state.untrusted
