"""`jarvis open` (cli/open_cmd.py): the URL of the `jarvis run` serving this data folder, with its token, for a
tab that has none (a new tab, a restarted browser). Given only once the server on the recorded port has proved it
holds this folder's token (core/server_identity.py): a port now held by another program never gets the token, and
with no Jarvis running the command says so and exits 1."""

from __future__ import annotations

import stat
import subprocess
import threading
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from orchestrator.cli.open_cmd import NOT_RUNNING
from tests.conftest import wait_until_up
from tests.fresh_cli import fresh_cli, start_jarvis_run, stop_jarvis_run
from tests.fakes.not_our_jarvis import NotOurJarvis, stale_record

# What `jarvis open` has no use for: the graph, the model client, the tools, the database, the web app.
NEEDS_NONE_OF = ("langgraph", "langchain_core", "langchain_openai", "openai", "mcp", "orchestrator.chat.graph",
                 "orchestrator.app", "sqlalchemy", "fastapi", "uvicorn")


def _open(jarvis_env, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`jarvis open ARGS` in a fresh interpreter: its exit code and output, and which of NEEDS_NONE_OF it imported."""
    return fresh_cli(jarvis_env, ["open", *args], NEEDS_NONE_OF, env=env)


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
    proc, base = start_jarvis_run(jarvis_env)
    try:
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
        stop_jarvis_run(proc)

    ran, _ = _open(jarvis_env, "--no-browser")  # stopped: its record is gone
    _refused_without_the_token(ran, token)

    # A Jarvis killed without stopping leaves its record; another program now listens on that port.
    (jarvis_env.data / "server_url").write_text(base + "\n")
    other = NotOurJarvis(port=int(base.rsplit(":", 1)[1]))
    try:
        ran, _ = _open(jarvis_env, "--no-browser")
        _refused_without_the_token(ran, token)
        other.check_asked_without(token)
    finally:
        other.close()


def test_with_no_jarvis_recorded_it_says_so_and_exits_1(jarvis_env):
    ran = jarvis_env.cli_here("open", "--no-browser")
    assert ran.returncode == 1 and NOT_RUNNING in ran.stderr and ran.stdout == "", (ran.stdout, ran.stderr)


@pytest.mark.parametrize("who", ["gone", "a plain server", "another folder's jarvis"])
def test_a_recorded_port_that_is_not_this_folder_s_jarvis_gets_no_token(jarvis_env, who):
    from orchestrator.server.security import load_or_create_token

    token = load_or_create_token(jarvis_env.settings)
    with stale_record(jarvis_env.data, who) as other:
        _refused_without_the_token(jarvis_env.cli_here("open", "--no-browser"), token)
        if other is not None:
            other.check_asked_without(token)


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
