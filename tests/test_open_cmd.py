"""`jarvis open` (cli/open_cmd.py): the URL of the `jarvis run` serving this data folder, with its token, for a
tab that has none (a new tab, a restarted browser). Given only once the server on the recorded port has proved it
holds this folder's token (core/server_identity.py): a port now held by another program never gets the token, and
with no Jarvis running the command says so and exits 1."""

from __future__ import annotations

import http.server
import json
import re
import signal
import stat
import subprocess
import sys
import threading
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from orchestrator.cli.open_cmd import NOT_RUNNING
from orchestrator.core.server_identity import proof
from tests.conftest import JARVIS_BIN, wait_until_up

# What `jarvis open` has no use for: the graph, the model client, the tools, the database, the web app.
NEEDS_NONE_OF = ("langgraph", "langchain_core", "langchain_openai", "openai", "mcp", "orchestrator.chat.graph",
                 "orchestrator.app", "sqlalchemy", "fastapi", "uvicorn")


def _open(jarvis_env, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`jarvis open ARGS` in a fresh interpreter: its exit code and output, and which of NEEDS_NONE_OF it imported."""
    probe = ("import sys, json\nfrom orchestrator.cli import main\n"
             f"sys.argv = ['jarvis', 'open', *{list(args)!r}]\n"
             "code = 0\ntry:\n    main()\nexcept SystemExit as exit:\n    code = exit.code\n"
             f"print('\\nLOADED', json.dumps([m for m in {NEEDS_NONE_OF!r} if m in sys.modules]), flush=True)\n"
             "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", probe], env=env or jarvis_env.env(), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, cwd=str(jarvis_env.path))
    said, _, loaded = proc.stdout.rpartition("\nLOADED ")
    assert loaded, (proc.stdout, proc.stderr)
    return subprocess.CompletedProcess(proc.args, proc.returncode, said, proc.stderr), json.loads(loaded)


class _OtherProgram:
    """A plain HTTP server on `port` (0: any): it records every request, and answers the challenge with `token`'s
    proof (another data folder's Jarvis) or, without one, with nonsense."""

    def __init__(self, port: int = 0, token: str | None = None):
        received = self.received = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib handler's name
                received.append(self.path + json.dumps(dict(self.headers.items())))
                challenge = parse_qs(urlsplit(self.path).query).get("challenge", [""])[0]
                answer = proof(token, challenge, self.server.server_address[1]) if token else "0" * 64
                body = json.dumps({"service": "jarvis", "proof": answer}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _refused_without_the_token(ran: subprocess.CompletedProcess, token: str) -> None:
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert NOT_RUNNING in ran.stderr
    assert token not in ran.stdout + ran.stderr and "?token=" not in ran.stdout


@pytest.mark.slow
def test_jarvis_open_gives_the_running_jarvis_s_url_and_never_a_stale_port_s(jarvis_env, tmp_path):
    """A real `jarvis run`: `jarvis open --no-browser` prints its URL, whose token opens the app, without loading
    the graph; without --no-browser the URL goes to the browser ($BROWSER here). Once Jarvis has stopped it says
    so; and when another program holds the port a killed Jarvis left recorded, that program is asked who it is,
    never sent the token, and no URL is printed."""
    proc = subprocess.Popen([str(JARVIS_BIN), "run", "--port", "0", "--no-open", "--no-services"],
                            env=jarvis_env.env(), cwd=str(jarvis_env.path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()
        started = re.search(r"running at (http://[^/\s]+)", line)
        assert started, line + (proc.stderr.read() if proc.poll() is not None else "")
        base = started.group(1)
        token = (jarvis_env.data / "server_token").read_text().strip()

        ran, loaded = _open(jarvis_env, "--no-browser")  # Jarvis may still be starting: it says who it is then too
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == f"{base}/?token={token}"
        assert loaded == [], loaded
        wait_until_up(base)
        url = ran.stdout.strip()
        given = parse_qs(urlsplit(url).query)["token"][0]
        with httpx.Client(base_url=base, timeout=60) as client:
            assert client.get(url).status_code == 200  # the page takes it (a wrong one is refused: below)
            views = client.get("/api/views", headers={"Authorization": f"Bearer {given}"})
            assert views.status_code == 200 and views.json(), views.text
            wrong = client.get("/?token=" + "x" * 43)
            assert wrong.status_code == 401 and "jarvis open" in wrong.text
            missing = client.get("/api/views")
            assert missing.status_code == 401 and "jarvis open" in missing.json()["detail"]

        browser = tmp_path / "browser.sh"  # the user's $BROWSER: it writes down the URL it was given
        opened = tmp_path / "opened.txt"
        browser.write_text(f"#!/bin/sh\nprintf '%s' \"$1\" > {opened}\n")
        browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
        ran, _ = _open(jarvis_env, env={**jarvis_env.env(), "BROWSER": str(browser)})
        assert ran.returncode == 0, ran.stderr
        assert opened.read_text() == url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    ran, _ = _open(jarvis_env, "--no-browser")  # stopped: its record is gone
    _refused_without_the_token(ran, token)

    # A Jarvis killed without stopping leaves its record; another program now listens on that port.
    (jarvis_env.data / "server_url").write_text(base + "\n")
    other = _OtherProgram(port=int(base.rsplit(":", 1)[1]))
    try:
        ran, _ = _open(jarvis_env, "--no-browser")
        _refused_without_the_token(ran, token)
        assert other.received, "the port was not even asked who it is"
        assert all(token not in seen and "authorization" not in seen.lower() for seen in other.received)
    finally:
        other.close()


def test_with_no_jarvis_recorded_it_says_so_and_exits_1(jarvis_env):
    ran = jarvis_env.cli_here("open", "--no-browser")
    assert ran.returncode == 1 and NOT_RUNNING in ran.stderr and ran.stdout == "", (ran.stdout, ran.stderr)


@pytest.mark.parametrize("who", ["nobody", "a plain server", "another folder's jarvis"])
def test_a_recorded_port_that_is_not_this_folder_s_jarvis_gets_no_token(jarvis_env, who):
    from orchestrator.server.security import load_or_create_token

    token = load_or_create_token(jarvis_env.settings)
    other = None if who == "nobody" else _OtherProgram(token="o" * 43 if who.startswith("another") else None)
    try:
        if other is None:
            import socket

            with socket.socket() as s:  # a port nothing listens on any more
                s.bind(("127.0.0.1", 0))
                url = f"http://127.0.0.1:{s.getsockname()[1]}"
        else:
            url = other.url
        (jarvis_env.data / "server_url").write_text(url + "\n")
        _refused_without_the_token(jarvis_env.cli_here("open", "--no-browser"), token)
        if other is not None:
            assert other.received, "the port was not even asked who it is"
            assert all(token not in seen and "authorization" not in seen.lower() for seen in other.received)
    finally:
        if other is not None:
            other.close()


def test_a_headless_session_opens_no_browser(monkeypatch):
    """Without X or Wayland, Python's webbrowser would start a text browser in the terminal: the URL is only
    printed. $BROWSER is the user's choice and is used."""
    from orchestrator.cli import open_cmd

    monkeypatch.setattr(open_cmd.sys, "platform", "linux")
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):
        monkeypatch.delenv(name, raising=False)
    assert open_cmd._headless()
    monkeypatch.setenv("BROWSER", "firefox")
    assert not open_cmd._headless()
    monkeypatch.delenv("BROWSER")
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    assert not open_cmd._headless()


def test_a_jarvis_still_starting_already_proves_who_it_is(jarvis_env):
    """`jarvis run` answers its port before Jarvis is built (server/starting.py), and records its address then: its
    /identity answers at once, so `jarvis open` right after `jarvis run` gives the URL instead of "not running"."""
    from orchestrator.server.listen import bind_socket, uvicorn_server
    from orchestrator.server.security import Guard, GuardMiddleware, load_or_create_token
    from orchestrator.server.starting import StartingApp

    token = load_or_create_token(jarvis_env.settings)
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    guard = Guard(jarvis_env.settings, token, port)
    shell = StartingApp(lambda inner: GuardMiddleware(inner, guard_of=lambda: guard), token=token)
    shell.stage = "loading the tools"
    server = uvicorn_server(shell)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        assert shell._loop_known.wait(120), "the server's loop did not start"  # a hang guard
        (jarvis_env.data / "server_url").write_text(f"http://127.0.0.1:{port}\n")
        ran = jarvis_env.cli_here("open", "--no-browser")
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == f"http://127.0.0.1:{port}/?token={token}"
        short = httpx.get(f"http://127.0.0.1:{port}/identity", params={"challenge": "short"}, timeout=60)
        assert short.status_code == 422
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
