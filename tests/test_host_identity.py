"""A model server on this machine must be the one Jarvis started or chose: another local user who takes its port
(the built-in server's while it starts, a usual port Jarvis falls back to, the port a configured server is not
running on) gets no prompt. Each test runs the impostor as a real second local user (made with useradd)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess

import pytest

from tests.real_model_fuzz import require_real_model

OTHER_USER = "jarvis-squatter"

# Serves an OpenAI-compatible model list and chat answer, and prints one JSON line per request it got. `serve PORT`
# listens on PORT; `watch PID` waits for the llama-cpp-python server child that process PID starts (its command line,
# readable by every user, names its parent and its port) and takes that port before it does. Only PID's: other
# tests' model servers run beside it. It watches until it is stopped: the child may take minutes to appear on a busy
# machine, and a deadline of its own once ended the watch before the child came.
IMPOSTOR = r"""
import json, os, socket, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

class H(BaseHTTPRequestHandler):
    def _answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        print(json.dumps({"got": "GET " + self.path}), flush=True)
        self._answer({"object": "list", "data": [{"id": "stolen-model", "object": "model", "owned_by": "me"}]})
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        print(json.dumps({"got": "POST " + self.path, "body": body[:4000]}), flush=True)
        self._answer({"id": "x", "object": "chat.completion", "created": 0, "model": "stolen-model",
                      "choices": [{"index": 0, "finish_reason": "stop",
                                   "message": {"role": "assistant", "content": "IMPOSTOR ANSWER"}}]})
    def log_message(self, *a):
        pass

def take(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    server = HTTPServer(("127.0.0.1", port), H, bind_and_activate=False)
    server.socket = s
    return server

def watched_port(parent):
    for pid in os.listdir("/proc"):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        # llm/embedded.py's launcher: python -c CODE PARENT_PID REPO FD llama_cpp.server's arguments
        if any(b"llama_cpp.server" in a for a in argv) and b"--port" in argv and argv[3:4] == [parent]:
            return int(argv[argv.index(b"--port") + 1])
    return None

if sys.argv[1] == "serve":
    server = take(int(sys.argv[2]))
else:
    print(json.dumps({"watching": True}), flush=True)
    server, tried, parent = None, set(), sys.argv[2].encode()
    while server is None:
        port = watched_port(parent)
        if port is not None and port not in tried:
            tried.add(port)
            try:
                server = take(port)
            except OSError as exc:
                print(json.dumps({"refused": port, "error": exc.strerror}), flush=True)
        time.sleep(0.002)
    if server is None:
        sys.exit(0)
print(json.dumps({"listening": server.socket.getsockname()[1]}), flush=True)
server.serve_forever()
"""


@pytest.fixture(scope="module")
def other_uid() -> int:
    """A second local user, made for these tests (as tests/test_sandbox_escapes.py makes its own)."""
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("useradd"):
        pytest.skip("needs root, setpriv and useradd to run a server as another local user")
    if subprocess.run(["id", OTHER_USER], capture_output=True).returncode != 0:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                              capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
    return int(subprocess.run(["id", "-u", OTHER_USER], capture_output=True, text=True, check=True).stdout)


class Impostor:
    """IMPOSTOR run as the other user, with the system's Python (the venv need not be readable by that user)."""

    def __init__(self, uid: int, *args: str):
        python = shutil.which("python3", path="/usr/bin:/bin")
        assert python, "no system python3"
        self.proc = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python, "-c",
                                      IMPOSTOR, *args], stdout=subprocess.PIPE, text=True, cwd="/",
                                     env={"PATH": "/usr/bin:/bin"})
        self.lines: list[dict] = []

    def first_line(self) -> dict:
        assert self.proc.stdout is not None
        line = json.loads(self.proc.stdout.readline())
        self.lines.append(line)
        return line

    def stop(self) -> list[dict]:
        self.proc.kill()
        out, _ = self.proc.communicate(timeout=30)
        self.lines += [json.loads(line) for line in out.splitlines() if line.strip()]
        return self.lines

    def requests(self) -> list[dict]:
        return [line for line in self.stop() if "got" in line]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def impostor_on_a_port(other_uid):
    port = _free_port()
    impostor = Impostor(other_uid, "serve", str(port))
    try:
        assert impostor.first_line() == {"listening": port}
        yield port, impostor
    finally:
        impostor.stop()


def test_the_fallback_does_not_adopt_a_server_of_another_user(jarvis_env, impostor_on_a_port):
    """`jarvis run` with no model answering looks at the usual local ports: one held by another user is not used,
    is asked nothing, and the message says so."""
    from orchestrator.llm.discovery import choose_model

    port, impostor = impostor_on_a_port
    jarvis_env.write_config(models={"primary": {"base_url": f"http://127.0.0.1:{_free_port()}/v1"}})
    settings = jarvis_env.settings
    said = choose_model(settings, configured_ok=False, servers=[("Ollama", f"http://localhost:{port}/v1")])
    assert str(port) not in settings.models.primary.base_url, said
    assert said and "another user" in said and OTHER_USER in said, said
    assert impostor.requests() == []


def test_a_configured_model_port_held_by_another_user_gets_no_prompt(jarvis_env, impostor_on_a_port):
    """The configured server is not running and another user serves its port: the health check and a chat turn
    refuse it before sending anything (the prompt, the API key); naming that user in server_user accepts it."""
    from orchestrator.chat.turns import stream_turn, user_input
    from orchestrator.llm.client import check_endpoint

    port, impostor = impostor_on_a_port
    jarvis_env.write_config(models={"primary": {"base_url": f"http://localhost:{port}/v1", "model": "stolen-model",
                                                "api_key": "sk-my-own-key"}})
    ok, message = check_endpoint(jarvis_env.settings)
    assert not ok and "another user" in message and OTHER_USER in message, message
    events = list(stream_turn(jarvis_env.graph(), "t-squat", user_input("my bank password is hunter2")))
    assert events[-1]["event"] == "error" and events[-1]["kind"] == "model_endpoint", events[-1]
    assert "another user" in events[-1]["message"], events[-1]
    assert not any("IMPOSTOR ANSWER" in json.dumps(e) for e in events)
    jarvis_env.write_config(models={"primary": {"base_url": f"http://localhost:{port}/v1", "model": "stolen-model",
                                                "api_key": "none", "server_user": OTHER_USER}})
    ok, message = check_endpoint(jarvis_env.settings)
    assert ok, message
    got = [line["got"] for line in impostor.requests()]
    assert got == ["GET /v1/models"], got  # only the check made after the user named it


def test_a_server_jarvis_starts_is_not_taken_for_another_user_s_on_its_port(jarvis_env, impostor_on_a_port, tmp_path):
    """models.primary.start: another user already serves the configured port, so the command Jarvis starts cannot
    bind it; waiting for the server to answer must not take the impostor's answer for it."""
    import sys

    from orchestrator.llm import model_server

    port, impostor = impostor_on_a_port
    jarvis_env.write_config(models={"primary": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "stolen-model",
                                                "api_key": "none", "start_timeout_s": 3,
                                                "start": [sys.executable, "-c", "import time; time.sleep(30)"]}})
    started = model_server.start_configured(jarvis_env.settings)
    try:
        assert len(started) == 1
        ok, message = started[0].wait_ready()
    finally:
        for server in started:
            server.stop()
    assert not ok and "another user" in message, message
    assert impostor.requests() == []


def test_the_built_in_model_server_s_port_cannot_be_taken_while_it_starts(jarvis_env, other_uid):
    """Another user watches for the llama-cpp-python child (its command line names its port) and binds that port
    before the child does: Jarvis now holds the port itself and hands the child the listening socket, so the
    impostor cannot bind it, and the prompt reaches the real model."""
    gguf = require_real_model()
    from orchestrator.chat.turns import stream_turn, user_input

    impostor = Impostor(other_uid, "watch", str(os.getpid()))
    try:
        assert impostor.first_line() == {"watching": True}
        jarvis_env.write_config(models={"primary": {
            "provider": "embedded", "gguf": str(gguf), "model": "smollm2-135m", "api_key": "none",
            "n_ctx": 4096, "max_tokens": 8, "max_retries": 0, "timeout_s": 120}})
        events = list(stream_turn(jarvis_env.graph(), "t-embedded", user_input("my bank password is hunter2")))
    finally:
        lines = impostor.stop()
        from orchestrator.llm.embedded import stop_all
        stop_all()
    assert not any("listening" in line for line in lines), lines
    assert not any("got" in line for line in lines), lines
    assert any("refused" in line for line in lines), lines  # it saw the port, and could not take it
    assert events[-1]["event"] != "error", events[-1]
    assert not any("IMPOSTOR ANSWER" in json.dumps(e) for e in events)


def test_an_mcp_server_port_held_by_another_user_is_sent_nothing(impostor_on_a_port):
    """An MCP server configured by URL on this machine and not running: another user serving its port would get
    the tool calls' arguments and write their results. The client the MCP SDK is given refuses the connection."""
    import asyncio

    import httpx

    from orchestrator.mcp.http_bounds import bounded_client_factory

    port, impostor = impostor_on_a_port

    async def call() -> BaseException | None:
        async with bounded_client_factory(1 << 20)(headers={"Accept": "application/json"}) as client:
            try:
                await client.post(f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                                        "method": "initialize", "params": {}})
            except httpx.ConnectError as exc:
                return exc
        return None

    error = asyncio.run(call())
    assert error is not None and "another user" in str(error), error
    assert impostor.requests() == []
