"""A one-shot `jarvis chat "..."` goes through the `jarvis run` serving the same data folder (cli/via_server.py):
no graph is built in the command, confirmations are asked on the terminal and answered through the server's API.
A recorded address that is stale (the server gone, or something else answering there, another folder's Jarvis
included) never receives the token, and the chat runs in the command as before."""

from __future__ import annotations

import http.server
import json
import os
import stat
import subprocess
import threading

import pytest

from tests.conftest import answer, tool_call, wait_until_up
from tests.fresh_cli import fresh_cli, start_jarvis_run, stop_jarvis_run
from tests.fakes.not_our_jarvis import stale_record

pytestmark = pytest.mark.slow

GRAPH_MODULES = ("langgraph", "langchain_core", "langchain_openai", "openai", "orchestrator.chat.graph")


def _chat(jarvis_env, text: str, stdin=subprocess.DEVNULL) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`jarvis chat TEXT` in a fresh interpreter: what it printed, and which of GRAPH_MODULES it imported."""
    return fresh_cli(jarvis_env, ["chat", text], GRAPH_MODULES, stdin=stdin)


@pytest.fixture
def jarvis_running(jarvis_env):
    """A real `jarvis run` on a free port over jarvis_env, fully started."""
    proc, base = start_jarvis_run(jarvis_env)
    try:
        wait_until_up(base)
        yield base
    finally:
        stop_jarvis_run(proc)


def test_a_one_shot_chat_goes_through_the_running_jarvis_without_building_a_graph(jarvis_env, jarvis_running):
    recorded = jarvis_env.data / "server_url"
    assert recorded.read_text().strip() == jarvis_running
    assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
    jarvis_env.server.push(answer("Answered by the running Jarvis."))
    ran, loaded = _chat(jarvis_env, "hello")
    assert ran.returncode == 0, ran.stderr
    assert "Answered by the running Jarvis." in ran.stdout
    assert loaded == [], loaded  # the command built no graph: the server ran the turn
    assert "(thread cli-" in ran.stderr


def test_a_confirmation_is_asked_on_the_terminal_and_answered_through_the_running_jarvis(jarvis_env, jarvis_running):
    target = jarvis_env.root / "note.txt"
    jarvis_env.server.push(tool_call("fs_write_text", path=str(target), content="via the server"),
                           answer("Written through the server."))
    main, terminal = os.openpty()  # a terminal to ask on: the answer is typed there
    try:
        os.write(main, b"a\n")
        ran, loaded = _chat(jarvis_env, "write a note", stdin=terminal)
    finally:
        os.close(terminal)
        os.close(main)
    assert ran.returncode == 0, ran.stderr
    assert "Confirmation needed (fs_write_text)" in ran.stderr
    assert "Written through the server." in ran.stdout
    assert target.read_text() == "via the server"
    assert loaded == [], loaded


@pytest.mark.parametrize("who", ["gone", "something else", "another folder's jarvis"])
def test_a_stale_address_never_receives_the_token_and_the_chat_runs_here(jarvis_env, who):
    from orchestrator.server.security import load_or_create_token

    token = load_or_create_token(jarvis_env.settings)
    with stale_record(jarvis_env.data, who) as other:
        jarvis_env.server.push(answer("Answered in the command."))
        ran, loaded = _chat(jarvis_env, "hello")
        assert ran.returncode == 0, ran.stderr
        assert "Answered in the command." in ran.stdout
        assert "langgraph" in loaded  # the command ran the turn itself
        if other is not None:
            other.check_asked_without(token)


def test_a_relay_to_the_real_jarvis_cannot_borrow_its_proof(jarvis_env, jarvis_running):
    """Whatever took a stale recorded port passes the command's challenge on to this folder's real `jarvis run`
    (still serving on another port) and hands its proof back: the proof is bound to the port the server answers
    on, so the command does not take the relay for its Jarvis and never sends it the token."""
    from orchestrator.server.security import load_or_create_token

    token = load_or_create_token(jarvis_env.settings)
    received: list[str] = []

    class Relay(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib handler's name
            received.append(self.path + json.dumps(dict(self.headers.items())))
            import httpx

            body = httpx.get(jarvis_running + self.path, timeout=10).content
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args):
            pass

    relay = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    try:
        (jarvis_env.data / "server_url").write_text(f"http://127.0.0.1:{relay.server_address[1]}\n")
        jarvis_env.server.push(answer("Answered in the command."))
        ran, loaded = _chat(jarvis_env, "hello")
        assert ran.returncode == 0, ran.stderr
        assert "Answered in the command." in ran.stdout and "langgraph" in loaded
        assert received, "the address was not even checked"
        assert all(token not in seen and "authorization" not in seen.lower() for seen in received), received
    finally:
        relay.shutdown()
        relay.server_close()
