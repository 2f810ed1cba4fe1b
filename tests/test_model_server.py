"""`models.primary.start`: an outside model server (here the scripted OpenAI-compatible server run as its own
program) that Jarvis starts when its endpoint does not answer, starts again when it dies, and stops (or, killed,
takes down) with Jarvis."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from orchestrator.core.config import ConfigError, settings_from_dict
from orchestrator.llm.client import check_endpoint
from orchestrator.llm.model_server import running, start_configured
from tests.conftest import JARVIS_BIN, REPO, wait_until_up
from tests.mcp_helpers import wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie not reaped yet counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def _settings(tmp_path, port: int, start: list[str] | None):
    return settings_from_dict({
        "models": {"primary": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "scripted-model", "api_key": "x",
                               "start": start, "start_timeout_s": 60}},
        "storage": {"data_dir": str(tmp_path / "data")}}, tmp_path)


def _fake_server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "tests.fakes.llm_server", "--port", str(port), "--echo"]


def test_the_start_command_runs_when_nothing_answers_and_is_restarted_when_killed(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    port = _free_port()
    settings = _settings(tmp_path, port, _fake_server_command(port))
    assert not check_endpoint(settings)[0]
    (server,) = start_configured(settings)
    try:
        assert check_endpoint(settings)[0] and running("primary") is server
        first = server.supervisor.proc.pid
        assert f"pid {first}" in server.describe()
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: server.supervisor.starts == 2 and check_endpoint(settings)[0], timeout=60, interval=0.2)
        assert "restarted 1 time(s), last killed by SIGKILL" in server.describe()
        second = server.supervisor.proc.pid
        assert start_configured(settings) == []  # running already: not started twice
    finally:
        server.stop()
    assert _gone(second) and running("primary") is None
    assert "scripted OpenAI-compatible server" in (tmp_path / "data" / "model-server-primary.log").read_text()


def test_an_endpoint_that_already_answers_is_left_alone(tmp_path, llm_server):
    port = int(llm_server.base_url.rsplit(":", 1)[1].split("/")[0])
    settings = _settings(tmp_path, port, [sys.executable, "-c", "raise SystemExit('must not run')"])
    assert start_configured(settings) == []


def test_a_command_that_cannot_start_is_given_up_and_says_where_its_output_is(tmp_path):
    settings = _settings(tmp_path, _free_port(), [sys.executable, "-c", "import sys; print('no such model file'); sys.exit(4)"])
    (server,) = start_configured(settings)
    try:
        ok, message = server.wait_ready()
        assert not ok and "failed 5 times" in message and "model-server-primary.log" in message
        assert "no such model file" in server.log_path.read_text()
    finally:
        server.stop()


@pytest.mark.parametrize("start, why", [([], "list of non-empty strings"), (["ollama", ""], "non-empty strings")])
def test_a_bad_start_command_is_refused_at_load(tmp_path, start, why):
    with pytest.raises(ConfigError, match=why):
        _settings(tmp_path, 1, start)
    with pytest.raises(ConfigError, match="outside server"):
        settings_from_dict({"models": {"primary": {"provider": "embedded", "gguf": "m.gguf", "start": ["x"]}}}, tmp_path)


def test_jarvis_run_starts_the_model_server_and_takes_it_down_when_killed(jarvis_env):
    port = _free_port()
    jarvis_env.write_config(server={"port": 0}, models={"primary": {"base_url": f"http://127.0.0.1:{port}/v1",
                                                                    "start": _fake_server_command(port)}})
    proc = subprocess.Popen([str(JARVIS_BIN), "run", "--no-services"], env=jarvis_env.env(), cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()
        url, token = re.search(r"running at (http://[^/]+)/\?token=(\S+)", line).groups()
        wait_until_up(url)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
            model = next(x for x in c.get("/api/health").json()["checks"] if x["name"] == "model (primary)")
        assert model["ok"] and "started by Jarvis" in model["detail"], model
        pid = int(re.search(r"pid (\d+)", model["detail"]).group(1))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    wait_for(lambda: _gone(pid), timeout=30, interval=0.1)
    assert not httpx_answers(port)


def httpx_answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
        return True
    except httpx.HTTPError:
        return False

