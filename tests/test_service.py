"""Jarvis as a login service: the systemd unit checked by systemd's own `systemd-analyze verify`, the launchd
plist by plistlib and a schema of launchd's keys, install/uninstall in a temporary HOME, and the restart policy
applied by `jarvis service run` to a `jarvis run` killed with SIGKILL while a jorb waits for a reply."""

from __future__ import annotations

import os
import plistlib
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import jsonschema
import pytest

from orchestrator.server.service_unit import (LaunchdAgent, ServiceCommand, ServiceError, SystemdUserService,
                                       launchd_plist, service_for_platform, systemd_unit_text)
from orchestrator.core.supervisor import RestartPolicy, Supervisor
from tests.conftest import JARVIS_BIN, wait_until_up
from tests.test_jorbs import step

needs_systemd_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                           reason="systemd-analyze (Debian package systemd) is not installed")


def verify(unit: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)


@needs_systemd_analyze
def test_the_installed_unit_passes_systemd_analyze_verify(jarvis_env, tmp_path):
    service = SystemdUserService(tmp_path / "home", jarvis_env.settings)
    path = service.write()
    assert path == tmp_path / "home" / ".config" / "systemd" / "user" / "jarvis.service"
    done = verify(path)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr  # warnings too would be printed
    text = path.read_text()
    assert "Restart=on-failure" in text and "RestartSec=5" in text and "StartLimitBurst=5" in text
    assert f'Environment="JARVIS_CONFIG={jarvis_env.config_path}"' in text
    assert re.search(r'^ExecStart=".*jarvis" "run" "--no-open" "--no-token-in-output"$', text, re.M)


@needs_systemd_analyze
def test_paths_with_spaces_percent_and_dollar_stay_one_argument(tmp_path):
    """A checkout under "My Projects %h $HOME": unquoted, systemd would split the path at the space and expand %h
    and $HOME, and the command would not be found."""
    folder = tmp_path / "My Projects %h $HOME"
    folder.mkdir()
    exe = folder / "jarvis"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    command = ServiceCommand([str(exe), "run", "--no-open", "--config", str(folder / "c.yml")],
                             {"JARVIS_CONFIG": str(folder / "c.yml")}, folder)
    unit = tmp_path / "jarvis.service"
    unit.write_text(systemd_unit_text(command))
    done = verify(unit)
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr
    naive = systemd_unit_text(command).replace(f'"{str(exe).replace("%", "%%")}"', str(exe))
    unit.write_text(naive)
    assert verify(unit).returncode != 0  # the check itself catches a mis-quoted command


def test_a_path_with_a_line_break_is_refused(tmp_path):
    command = ServiceCommand(["/usr/bin/jarvis", "run"], {"JARVIS_CONFIG": "/tmp/x\nExecStartPre=/bin/evil"}, tmp_path)
    with pytest.raises(ServiceError, match="line break"):
        systemd_unit_text(command)
    with pytest.raises(ServiceError, match="line break"):
        launchd_plist(command, tmp_path / "log")


# launchd.plist(5): the keys Jarvis writes and their types; no other key is allowed (a misspelt key is ignored by
# launchd, silently).
LAUNCHD_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["Label", "ProgramArguments", "RunAtLoad", "KeepAlive"],
    "properties": {
        "Label": {"type": "string", "pattern": r"^[A-Za-z0-9.\-]+$"},
        "ProgramArguments": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
        "EnvironmentVariables": {"type": "object", "additionalProperties": {"type": "string"}},
        "WorkingDirectory": {"type": "string", "pattern": "^/"},
        "RunAtLoad": {"type": "boolean"},
        "KeepAlive": {"oneOf": [{"type": "boolean"}, {"type": "object", "additionalProperties": False,
                                                       "properties": {"SuccessfulExit": {"type": "boolean"}}}]},
        "ThrottleInterval": {"type": "integer", "minimum": 1},
        "ExitTimeOut": {"type": "integer", "minimum": 0},
        "ProcessType": {"enum": ["Background", "Standard", "Adaptive", "Interactive"]},
        "StandardOutPath": {"type": "string", "pattern": "^/"},
        "StandardErrorPath": {"type": "string", "pattern": "^/"},
    },
}


def test_the_launchd_agent_is_a_valid_plist_that_restarts_on_failure(jarvis_env, tmp_path):
    agent = LaunchdAgent(tmp_path / "home", jarvis_env.settings)
    path = agent.write()
    assert path == tmp_path / "home" / "Library" / "LaunchAgents" / "local.jarvis.assistant.plist"
    plist = plistlib.loads(path.read_bytes())
    jsonschema.validate(plist, LAUNCHD_SCHEMA)
    assert plist["KeepAlive"] == {"SuccessfulExit": False} and plist["ThrottleInterval"] == 5
    assert plist["ProgramArguments"][-3:] == ["run", "--no-open", "--no-token-in-output"]
    assert plist["EnvironmentVariables"]["JARVIS_CONFIG"] == str(jarvis_env.config_path)
    assert plist["StandardOutPath"] == str(tmp_path / "home" / "Library" / "Logs" / "Jarvis" / "jarvis.log")


def _tree(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_install_then_uninstall_leaves_the_home_as_it_was(jarvis_env, tmp_path):
    """Through the real command and the real systemctl: here (a container with no user session bus) enabling
    fails, and says so; the file is written all the same and uninstall removes it."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (home / "notes.txt").write_text("mine")
    before = _tree(home)
    env = {**jarvis_env.env(), "HOME": str(home)}
    env.pop("XDG_CONFIG_HOME", None)
    unit = home / ".config" / "systemd" / "user" / "jarvis.service"
    installed = subprocess.run([str(JARVIS_BIN), "service", "install"], env=env, capture_output=True, text=True,
                               timeout=120)
    assert unit.is_file() and f"wrote {unit}" in installed.stdout
    if installed.returncode != 0:  # no user systemd here: the message says what failed
        assert "could not be enabled" in installed.stderr and "systemctl --user" in installed.stderr
    status = subprocess.run([str(JARVIS_BIN), "service", "status"], env=env, capture_output=True, text=True, timeout=60)
    assert f"installed: {unit}" in status.stdout
    removed = subprocess.run([str(JARVIS_BIN), "service", "uninstall"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert removed.returncode == 0 and f"removed {unit}" in removed.stdout, removed.stderr
    assert _tree(home) == before

    (home / "Library" / "LaunchAgents").mkdir(parents=True)  # there on every Mac
    (home / "Library" / "Logs").mkdir()
    before = _tree(home)
    agent = LaunchdAgent(home, jarvis_env.settings)  # the macOS files, written and removed the same way
    agent.write()
    agent.log_file.write_text("a line jarvis run wrote\n")
    assert agent.installed
    agent.remove()
    assert _tree(home) == before


def test_where_neither_applies_the_message_says_what_to_do(jarvis_env, tmp_path, monkeypatch):
    with pytest.raises(ServiceError, match="jarvis service run"):
        service_for_platform(jarvis_env.settings, "win32", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # a Linux without systemctl
    with pytest.raises(ServiceError, match="no systemd"):
        service_for_platform(jarvis_env.settings, "linux", tmp_path)


def test_a_program_that_keeps_failing_is_given_up_after_the_start_limit(tmp_path):
    events: list[str] = []
    sup = Supervisor([sys.executable, "-c", "raise SystemExit(3)"], RestartPolicy(delay_s=0, burst=3, interval_s=600),
                     name="broken", on_event=events.append)
    assert sup.run() == 1
    assert sup.starts == 3 and "failed 3 times" in sup.gave_up and "exited with status 3" in sup.gave_up
    clean = Supervisor([sys.executable, "-c", "pass"], RestartPolicy(delay_s=0), name="clean", on_event=events.append)
    assert clean.run() == 0 and clean.starts == 1  # on-failure: a clean exit is not restarted


class _Lines:
    """The lines a process writes, read off its pipe in a thread."""

    def __init__(self, stream) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=lambda: [self.q.put(line) for line in stream], daemon=True).start()

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.q.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r}; saw: {self.seen[-20:]}") from None
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found


def _settled(url: str, token: str, jid: str, status: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        while True:
            j = c.get(f"/api/jorbs/{jid}").json()
            if not j["working"] and j["status"] == status:
                return j
            if time.monotonic() > deadline:
                raise AssertionError(f"jorb {jid} is {j['status']}, not {status}")
            time.sleep(0.1)


def test_a_killed_jarvis_run_is_started_again_and_the_waiting_jorb_resumes(jarvis_env):
    jarvis_env.write_config(server={"port": 0}, channels={"burst_window_s": 0}, mcp={"dir": str(jarvis_env.path / "none")})
    jarvis_env.server.push(
        step(reasoning="Ask", script="jarvis.messages.send('local', '@magicapp', 'Hotels in Paris?')", await_reply=True),
        step(reasoning="Got it", done=True, result={"hotel": "Le Marais"}),
    )
    proc = subprocess.Popen([str(JARVIS_BIN), "service", "run"], env=jarvis_env.env(), cwd=str(jarvis_env.path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    out, err = _Lines(proc.stdout), _Lines(proc.stderr)
    try:
        first_pid = int(err.wait_for(r"started jarvis run \(pid (\d+)\)").group(1))
        # the service's output goes to the journal, which others may read: the address, not the token
        url, token_file = out.wait_for(r"running at (http://[^/]+)/ \(the access token is in (\S+):").groups()
        token = Path(token_file).read_text().strip()
        assert token not in "".join(out.seen) + "".join(err.seen)
        wait_until_up(url)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
            made = c.post("/api/jorbs", json={"name": "hotel", "plan": "ask Magic", "contacts": ["@magicapp"],
                                              "autonomy": {"message_send": "auto"}, "approve_autonomy": True})
            assert made.status_code == 201, made.text
        jid = made.json()["id"]
        _settled(url, token, jid, "awaiting_reply")

        os.kill(first_pid, signal.SIGKILL)
        err.wait_for(r"jarvis run killed by SIGKILL; starting it again in 5 s")
        second_pid = int(err.wait_for(r"started jarvis run \(pid (\d+)\)").group(1))
        assert second_pid != first_pid
        url = out.wait_for(r"running at (http://[^/]+)/ \(the access token is in").group(1)
        wait_until_up(url)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
            assert c.get(f"/api/jorbs/{jid}").json()["status"] == "awaiting_reply"
            sent = c.post("/api/inbound", json={"channel": "local", "sender": "@magicapp", "text": "Le Marais, 175"})
            assert sent.status_code == 200 and sent.json()["jorb_id"] == jid, sent.text
        done = _settled(url, token, jid, "done")
        assert done["result"] == {"hotel": "Le Marais"}
        assert "Le Marais, 175" in jarvis_env.server.requests[-1]["messages"][-1]["content"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0  # a stop asked for is not a failure, and nothing is restarted after it
    with pytest.raises(ProcessLookupError):
        os.kill(second_pid, 0)
