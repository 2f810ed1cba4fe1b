"""`jarvis doctor` on broken set-ups names each problem and what to do (real commands in subprocesses: a model
server that is down or lacks the model, no bubblewrap on PATH, a read-only data folder and a full disk (tmpfs
mounts, as root), an MCP server that crashes); GET /healthz and GET /api/health of the running server."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.mcp_helpers import write_server
from tests.ui_server import start_ui


def doctor(env, **extra_env) -> tuple[int, dict]:
    import json

    proc = env.cli("doctor", "--json", env={**env.env(), **extra_env}, timeout=180)
    return proc.returncode, json.loads(proc.stdout)


def check(report: dict, name: str) -> dict:
    found = [c for c in report["checks"] if c["name"] == name]
    assert found, [c["name"] for c in report["checks"]]
    return found[0]


def problems(report: dict) -> set[str]:
    return {c["name"] for c in report["checks"] if c["ok"] is False}


@pytest.fixture
def healthy(jarvis_env):
    """A set-up where everything that applies passes (the keyring of the tests is plain text: an encrypted file
    keyring is not installed here, so the keyring check is expected to be the one problem)."""
    jarvis_env.write_config(server={"port": 0})
    return jarvis_env


def test_a_healthy_set_up_passes_but_the_plain_text_keyring(healthy):
    code, report = doctor(healthy)
    assert problems(report) == {"keyring"}, report
    assert code == 1 and not report["ok"]
    assert "plain text" in check(report, "keyring")["detail"]
    assert check(report, "model (primary)")["ok"] and check(report, "storage")["ok"]


def test_no_keyring_is_a_note_that_says_how_not_a_failure(healthy):
    """A headless machine: keyring finds no backend (it falls back to its `fail` backend)."""
    code, report = doctor(healthy, PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    keyring = check(report, "keyring")
    assert keyring["ok"] is None, keyring  # optional: secrets still come from JARVIS_SECRET_<NAME>
    assert "bin/pip install keyrings.cryptfile" in keyring["detail"] and "Secret Service" in keyring["detail"]
    assert code == 0 and report["ok"], report
    proc = healthy.cli("doctor", env={**healthy.env(), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"},
                       timeout=180)
    assert proc.returncode == 0 and "all checks pass" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_model_down_and_wrong_model_name(healthy):
    healthy.write_config(server={"port": 0}, models={"primary": {"base_url": f"http://127.0.0.1:{_closed_port()}/v1"}})
    _, report = doctor(healthy)
    model = check(report, "model (primary)")
    assert model["ok"] is False and "Cannot reach" in model["detail"] and "model server" in model["fix"]

    healthy.server.brain.model_list = ["llama3.2:latest", "qwen2.5:7b"]
    healthy.write_config(server={"port": 0}, models={"primary": {"model": "no-such-model"}})
    _, report = doctor(healthy)
    model = check(report, "model (primary)")
    assert model["ok"] is False and "no model named 'no-such-model'" in model["detail"]
    assert "qwen2.5:7b" in model["detail"]


def test_no_bubblewrap_on_path(healthy, tmp_path):
    healthy.write_config(server={"port": 0}, sandbox={"required": True})
    empty = tmp_path / "bin"
    empty.mkdir()
    _, report = doctor(healthy, PATH=str(empty))
    sandbox = check(report, "sandbox")
    assert sandbox["ok"] is False and "bubblewrap (bwrap) is not installed" in sandbox["detail"]
    assert "install-system-deps.sh bubblewrap" in sandbox["fix"]


def _mount_tmpfs(where: Path, options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")


def test_a_read_only_data_folder(healthy, tmp_path):
    data = tmp_path / "ro-data"
    _mount_tmpfs(data, "ro,size=1m")
    try:
        healthy.write_config(server={"port": 0}, storage={"data_dir": str(data)})
        _, report = doctor(healthy)
    finally:
        subprocess.run(["umount", str(data)], check=True)
    folder = check(report, "data folder")
    assert folder["ok"] is False and "Read-only file system" in folder["detail"] and "writable" in folder["fix"]


def test_a_full_disk(healthy, tmp_path):
    data = tmp_path / "full-data"
    _mount_tmpfs(data, "size=2m")
    try:
        with open(data / "filler", "wb") as f:  # fill it to the last byte
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        healthy.write_config(server={"port": 0}, storage={"data_dir": str(data)})
        _, report = doctor(healthy)
    finally:
        subprocess.run(["umount", str(data)], check=True)
    folder, disk = check(report, "data folder"), check(report, "disk space")
    assert folder["ok"] is False and "the disk is full" in folder["detail"] and "Free some space" in folder["fix"]
    assert disk["ok"] is False and disk["detail"].startswith("0 MB free") and "200 MB" in disk["fix"]


def test_a_crashing_mcp_server(healthy):
    write_server(healthy.path / "mcp", "crasher", "tests.fakes.mcp_test_server", "--fail-start", startup_timeout_s=5)
    write_server(healthy.path / "mcp", "fine", "tests.fakes.mcp_test_server")
    _, report = doctor(healthy, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    crasher, fine = check(report, "MCP server crasher"), check(report, "MCP server fine")
    assert crasher["ok"] is False and "crasher.toml" in crasher["fix"], crasher
    assert fine["ok"] is True
    assert problems(report) == {"keyring", "MCP server crasher"}


def test_healthz_without_token_and_the_health_report_with_it(jarvis_env):
    services = ["orchestrator.server.services:reminder_scheduler_service"]
    with start_ui(jarvis_env, services=services) as ui:
        up = httpx.get(ui.url + "/healthz", timeout=10)
        assert up.status_code == 200 and up.json() == {"service": "jarvis", "status": "up"}
        assert httpx.get(ui.url + "/api/health", timeout=10).status_code == 401
        # the Host check still holds without the token: a DNS-rebound page learns nothing
        assert httpx.get(ui.url + "/healthz", headers={"Host": "evil.example:80"}, timeout=10).status_code == 421
        from tests.mcp_helpers import wait_for

        def ticked():
            with ui.client() as c:
                report = c.get("/api/health").json()
            return report if check(report, "scheduler")["ok"] else None

        report = wait_for(ticked, timeout=30, interval=0.2)
        names = [c["name"] for c in report["checks"]]
        assert names[:5] == ["model (primary)", "storage", "data folder", "disk space", "scheduler"]
        assert {"MCP servers", "channel local", "channel telegram", "channel email"} <= set(names)
        assert "last tick" in check(report, "scheduler")["detail"]

        # jarvis doctor sees the running Jarvis on its port, and asks it for the scheduler's last tick
        port = int(ui.url.rsplit(":", 1)[1])
        jarvis_env.write_config(server={"port": port})
        _, doc = doctor(jarvis_env)
        assert "served by a running Jarvis" in check(doc, "port")["detail"]
        assert check(doc, "scheduler")["ok"] is True and "last tick" in check(doc, "scheduler")["detail"]


def test_the_port_taken_by_another_program(healthy):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        healthy.write_config(server={"port": other.getsockname()[1]})
        _, report = doctor(healthy)
    port = check(report, "port")
    assert port["ok"] is False and "taken by another program" in port["detail"] and "server.port" in port["fix"]


def test_the_storage_check_says_an_old_schema_is_not_current(healthy):
    import sqlite3

    healthy.data.mkdir(exist_ok=True)
    schema = Path(__file__).parent / "data" / "schema" / "jarvis-a12ba1e.sql"
    with sqlite3.connect(healthy.data / "jarvis.sqlite") as db:
        db.executescript(schema.read_text(encoding="utf-8"))
    _, report = doctor(healthy)
    storage = check(report, "storage")
    assert storage["ok"] is False and "older than this Jarvis" in storage["detail"] and "migrates" in storage["fix"]
    with sqlite3.connect(healthy.data / "jarvis.sqlite") as db:  # the doctor looked, and changed nothing
        assert "requested" not in [r[1] for r in db.execute("PRAGMA table_info(effects_ledger)")]


IMPOSTOR = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
log = sys.stdout
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        log.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization")}) + "\n"); log.flush()
        body = json.dumps({"service": "jarvis", "status": "up"}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
server = HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("ready", flush=True)
server.serve_forever()
"""


def test_the_token_is_never_sent_to_another_user_s_program_on_the_port(healthy, tmp_path):
    """Any local user can bind Jarvis's port while Jarvis is down and answer /healthz like it; doctor sends the
    token only to a listener of its own user."""
    import os
    import shutil

    setpriv, python = shutil.which("setpriv"), shutil.which("python3", path="/usr/bin:/bin")  # not the venv: nobody may not read it
    if os.geteuid() != 0 or not setpriv or not python:
        pytest.skip("needs root and setpriv to run a server as another user")
    (healthy.data).mkdir(exist_ok=True)
    (healthy.data / "server_token").write_text("t" * 43 + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    impostor = subprocess.Popen([setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", python, "-c",
                                 IMPOSTOR, str(port)], stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert impostor.stdout.readline().strip() == "ready"
        healthy.write_config(server={"port": port})
        _, report = doctor(healthy)
    finally:
        impostor.kill()
        seen = impostor.communicate()[0]  # one JSON line per request it got
    scheduler, port_check = check(report, "scheduler"), check(report, "port")
    assert scheduler["ok"] is False and "another user (uid 65534)" in scheduler["detail"]
    assert port_check["ok"] is False and "another user" in port_check["detail"]
    requests = seen.splitlines()
    assert requests and all('"auth": null' in line for line in requests), requests


def test_google_signed_in_and_then_revoked(jarvis_env, google_server):
    from google.oauth2.credentials import Credentials

    from orchestrator.tools import google_auth
    from orchestrator.server.doctor import google_check

    jarvis_env.write_config(google={"token_uri": google_server.token_uri})
    settings = jarvis_env.settings
    assert google_check(settings).ok is None  # not configured, nothing stored
    jarvis_env.write_config(google={"token_uri": google_server.token_uri, "client_secrets": str(jarvis_env.path / "c.json")})
    settings = jarvis_env.settings
    missing = google_check(settings)
    assert missing.ok is False and "jarvis auth google" in missing.fix
    google_auth.save_credentials(settings, Credentials.from_authorized_user_info(google_server.authorized_user_info()))
    fine = google_check(settings)
    assert fine.ok is True and google_server.state.refreshes == 1
    google_server.revoke()
    revoked = google_check(settings)
    assert revoked.ok is False and "expired or revoked" in revoked.detail and "jarvis auth google" in revoked.fix
