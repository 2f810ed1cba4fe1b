"""A real CalDAV and CardDAV server for the calendar and contacts tests: Radicale (pinned in the dev extra, so `make
test` installs it) started in a temporary folder on a free loopback port, TLS from the test CA of
tests/mail_servers.py, users from an htpasswd file, each user's collections their own.

Without Radicale the tests are skipped with the reason; JARVIS_REQUIRE_RADICALE=1 (make test) turns that into a
failure, so CI cannot skip them silently.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.mail_servers import free_port, make_ca_and_cert

_CONFIG = """\
[server]
hosts = 127.0.0.1:{port}
ssl = True
certificate = {cert}
key = {key}
max_content_length = 100000000
timeout = 60

[auth]
type = htpasswd
htpasswd_filename = {root}/users
htpasswd_encryption = plain
delay = 0

[rights]
type = owner_only

[storage]
filesystem_folder = {root}/collections

[logging]
level = warning
mask_passwords = True
"""


def _unavailable(reason: str) -> None:
    if os.environ.get("JARVIS_REQUIRE_RADICALE") == "1":
        pytest.fail(f"CalDAV/CardDAV tests cannot run: {reason} (JARVIS_REQUIRE_RADICALE=1)")
    pytest.skip(f"CalDAV/CardDAV tests skipped: {reason}")


class Radicale:
    """One Radicale for a test module. `url` is its root; a user's collections live under url + user + "/"."""

    def __init__(self, users: dict[str, str]):
        self.users = users
        self.root = Path(tempfile.mkdtemp(prefix="jarvis-radicale-"))
        self.port = free_port()
        self.ca, self.cert, self.key, self.fingerprint = make_ca_and_cert(self.root)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/"

    def start(self) -> "Radicale":
        if importlib.util.find_spec("radicale") is None:
            _unavailable("radicale is not installed (pip install -e '.[dev]')")
        (self.root / "users").write_text("".join(f"{u}:{p}\n" for u, p in self.users.items()))
        conf = self.root / "radicale.conf"
        conf.write_text(_CONFIG.format(port=self.port, cert=self.cert, key=self.key, root=self.root))
        self.proc = subprocess.Popen([sys.executable, "-m", "radicale", "--config", str(conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                _unavailable(f"radicale exited: {err[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), 1):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        _unavailable("radicale did not listen within 60 s")
        return self

    def client(self, user: str):  # noqa: ANN201 - a caldav.DAVClient: the tests' own direct access
        import caldav

        return caldav.DAVClient(self.url, username=user, password=self.users[user], ssl_verify_cert=str(self.ca))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        shutil.rmtree(self.root, ignore_errors=True)
