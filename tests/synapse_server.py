"""A real Matrix homeserver for the Matrix channel's tests: Synapse (pinned, in its own virtualenv under
.cache/mcp-venvs/synapse, which scripts/fetch_pypi_servers.py installs for `make test`) started on a free loopback
port with SQLite and a configuration written in a temporary folder, its accounts made through the shared-secret
registration admin API, stopped after the tests.

Without that Synapse the tests are skipped with the reason; JARVIS_REQUIRE_SYNAPSE=1 (make test, which installs it)
turns that into a failure, so CI cannot skip them silently.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from tests.mail_servers import free_port

REPO = Path(__file__).resolve().parent.parent
PYTHON = REPO / ".cache" / "mcp-venvs" / "synapse" / "bin" / "python"
SERVER_NAME = "jarvis.test"
# Synapse's own rate limits would slow a test's quick exchanges to a crawl; the homeserver here is the test's alone
UNLIMITED = {"per_second": 1000, "burst_count": 1000}


@dataclass
class Account:
    user_id: str
    access_token: str
    password: str


class Synapse:
    """`start()` runs the homeserver and waits for its client API; `register(name)` makes an account."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="jarvis-synapse-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.secret = secrets.token_hex(16)
        self.proc: subprocess.Popen | None = None

    def _config(self) -> Path:
        path = self.dir / "homeserver.yaml"
        subprocess.run([str(PYTHON), "-m", "synapse.app.homeserver", "--server-name", SERVER_NAME, "--config-path",
                        str(path), "--data-directory", str(self.dir), "--generate-config", "--report-stats=no"],
                       check=True, capture_output=True, timeout=120, cwd=self.dir)
        config = yaml.safe_load(path.read_text())
        log_config = self.dir / "log.yaml"
        log_config.write_text(yaml.safe_dump({
            "version": 1, "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
            "handlers": {"file": {"class": "logging.FileHandler", "formatter": "plain",
                                  "filename": str(self.dir / "homeserver.log")},
                         "access": {"class": "logging.FileHandler", "formatter": "plain",
                                    "filename": str(self.dir / "access.log")}},
            # each request the homeserver answered, one line: what a test reads to see a file was never fetched
            "loggers": {"synapse.access": {"level": "INFO", "handlers": ["access"], "propagate": False}},
            "root": {"level": "WARNING", "handlers": ["file"]}, "disable_existing_loggers": False}))
        config.update({
            "listeners": [{"port": self.port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                           "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
            "database": {"name": "sqlite3", "args": {"database": str(self.dir / "homeserver.db")}},
            "log_config": str(log_config),
            "registration_shared_secret": self.secret,
            "enable_registration": False,
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            "report_stats": False,
            "presence": {"enabled": False},
            "rc_message": UNLIMITED, "rc_registration": UNLIMITED, "rc_admin_redaction": UNLIMITED,
            "rc_login": {"address": UNLIMITED, "account": UNLIMITED, "failed_attempts": UNLIMITED},
            "rc_joins": {"local": UNLIMITED, "remote": UNLIMITED},
            "rc_invites": {"per_room": UNLIMITED, "per_user": UNLIMITED, "per_issuer": UNLIMITED},
        })
        path.write_text(yaml.safe_dump(config))
        return path

    def start(self, timeout: float = 120.0) -> "Synapse":
        config = self._config()
        self.proc = subprocess.Popen([str(PYTHON), "-m", "synapse.app.homeserver", "--config-path", str(config)],
                                     cwd=self.dir, stdout=subprocess.DEVNULL,
                                     stderr=(self.dir / "stderr.log").open("wb"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Synapse exited at start: {(self.dir / 'stderr.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/_matrix/client/versions", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"Synapse did not answer on {self.url} within {timeout:.0f} s")

    def register(self, name: str) -> Account:
        """A new account on the homeserver, by the shared-secret registration admin API (HMAC-SHA1 of nonce,
        user, password and "notadmin", NUL-separated)."""
        password = secrets.token_hex(8)
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        nonce = httpx.get(endpoint, timeout=10).json()["nonce"]
        mac = hmac.new(self.secret.encode(), b"\x00".join([nonce.encode(), name.encode(), password.encode(),
                                                           b"notadmin"]), hashlib.sha1).hexdigest()
        body = httpx.post(endpoint, json={"nonce": nonce, "username": name, "password": password, "admin": False,
                                          "mac": mac}, timeout=30).json()
        return Account(body["user_id"], body["access_token"], password)

    def downloads(self, mxc: str) -> list[str]:
        """The homeserver's access-log lines of requests for this file's content (mxc://server/id)."""
        log = self.dir / "access.log"
        media = mxc.removeprefix("mxc://")
        return [line for line in (log.read_text().splitlines() if log.exists() else []) if f"/download/{media}" in line]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def synapse_or_skip() -> Synapse:
    """A started Synapse; skipped (failed under JARVIS_REQUIRE_SYNAPSE=1) when it is not installed."""
    if not PYTHON.exists():
        reason = f"Synapse is not installed in {PYTHON.parent.parent} (scripts/fetch_pypi_servers.py installs it)"
        if os.environ.get("JARVIS_REQUIRE_SYNAPSE") == "1":
            pytest.fail(f"Matrix tests cannot run: {reason} (JARVIS_REQUIRE_SYNAPSE=1)")
        pytest.skip(f"Matrix tests skipped: {reason}")
    return Synapse().start()


class Person:
    """A real Matrix client (matrix-nio) logged in as one account of the test's homeserver, driven synchronously:
    the principal or a stranger writing to Jarvis's bot."""

    def __init__(self, server: Synapse, account: Account):
        import asyncio

        import nio

        self.account = account
        self.user_id = account.user_id
        self.loop = asyncio.new_event_loop()
        self.client = nio.AsyncClient(server.url, account.user_id)
        self.client.access_token = account.access_token
        self.client.user_id = account.user_id

    def _do(self, coro):
        import nio

        answer = self.loop.run_until_complete(coro)
        if isinstance(answer, nio.ErrorResponse):
            raise AssertionError(f"{self.user_id}: {answer.message} ({answer.status_code})")
        return answer

    def room_with(self, *invite: str, encrypted: bool = False) -> str:
        state = [{"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}]
        return self._do(self.client.room_create(invite=invite, initial_state=state if encrypted else ())).room_id

    def set_name(self, name: str) -> None:
        self._do(self.client.set_displayname(name))

    def invite(self, room: str, user: str) -> None:
        self._do(self.client.room_invite(room, user))

    def join(self, room: str) -> None:
        self._do(self.client.join(room))

    def send(self, room: str, content: dict, kind: str = "m.room.message") -> str:
        return self._do(self.client.room_send(room, kind, content)).event_id

    def say(self, room: str, text: str, reply_to: str | None = None) -> str:
        content: dict = {"msgtype": "m.text", "body": text}
        if reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return self.send(room, content)

    def upload(self, data: bytes, content_type: str, name: str) -> str:
        """`data` stored on the homeserver's media repository; its mxc:// URI."""
        import io

        async def upload():  # nio answers an upload with (answer, keys)
            return (await self.client.upload(io.BytesIO(data), content_type, name, filesize=len(data)))[0]

        return self._do(upload()).content_uri

    def send_file(self, room: str, data: bytes, name: str, msgtype: str = "m.file", mimetype: str = "application/pdf",
                  size: int | None = None, **content: object) -> tuple[str, str]:
        """A file event (`msgtype`) for `data`, uploaded first, its `info.size` said as `size` (the real one by
        default), more content fields as given; (event id, mxc URI)."""
        mxc = self.upload(data, mimetype, name)
        body = {"msgtype": msgtype, "body": name, "url": mxc,
                "info": {"size": len(data) if size is None else size, "mimetype": mimetype}}
        return self.send(room, {**body, **content}), mxc

    def invites(self) -> list[str]:
        """The rooms this account is invited to now (a full sync each time: a pending invite is in every one)."""
        self.client.next_batch = None
        return list(self._do(self.client.sync(timeout=0)).rooms.invite)

    def react(self, room: str, event_id: str, key: str) -> str:
        return self.send(room, {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}},
                         "m.reaction")

    def events(self, room: str) -> list[dict]:
        """The room's events, oldest first (its last 200)."""
        answer = self._do(self.client.room_messages(room, limit=200))
        return [e.source for e in reversed(answer.chunk)]

    def members(self, room: str) -> set[str]:
        return {m.user_id for m in self._do(self.client.joined_members(room)).members}

    def shown(self, room: str, sender: str) -> list[dict]:
        """`sender`'s messages in the room as a client shows them: each edit (m.replace) applied to its message;
        each as its content."""
        messages: dict[str, dict] = {}
        for event in self.events(room):
            content = event.get("content") or {}
            if event.get("sender") != sender or event.get("type") != "m.room.message":
                continue
            relates = content.get("m.relates_to") or {}
            if relates.get("rel_type") == "m.replace":
                if relates.get("event_id") in messages:
                    messages[relates["event_id"]] = content.get("m.new_content") or {}
                continue
            messages[event["event_id"]] = content
        return [dict(content, event_id=event_id) for event_id, content in messages.items()]

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()
