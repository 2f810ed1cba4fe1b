"""[29] Matrix down: the homeserver (a real Synapse behind a loopback relay) refusing connections, then back.
`jarvis run`'s sync loop retries with the channels' capped, jittered backoff (channels/retrying.py) instead of nio
waiting on its own without end, /api/health and `jarvis doctor` show the channel down with its last error and
next retry, and once the homeserver is back the user's messages are answered."""

from __future__ import annotations

import re

import pytest

from tests.mail_servers import Proxy
from tests.test_approvals_remote import _wait
from tests.test_doctor import check, doctor
from tests.test_matrix_chat import _texts, cast, synapse  # noqa: F401 - fixtures
from tests.ui_server import start_ui

pytestmark = pytest.mark.slow


def _channel(ui) -> dict:
    with ui.client() as c:
        return check(c.get("/api/health").json(), "channel matrix")


def _failed(channel: dict) -> int:
    """How many syncs in a row the channel says failed (it may be past 2 by the time health is read)."""
    found = re.search(r"\((\d+) failed syncs?\)", channel["detail"] or "")
    return int(found.group(1)) if found else 0


def test_matrix_down_is_retried_with_backoff_shown_in_health_and_doctor_then_back(jarvis_env, cast, synapse):
    relay = Proxy(synapse.port)
    channels = {"matrix": {"enabled": True, "homeserver": f"http://127.0.0.1:{relay.port}",
                           "user_id": cast.bot.user_id, "access_token": {"secret": "matrix_token"},
                           "sync_timeout_s": 1, "edit_every_s": 0.2},
                "user_identities": [f"matrix:{cast.principal.user_id}"]}
    jarvis_env.write_config(channels=channels)
    alice, bot = cast.principal, cast.bot.user_id
    room = alice.room_with(bot)
    with start_ui(jarvis_env, services=["orchestrator.server.services:matrix_inbound_service"]) as ui:
        _wait(lambda: bot in alice.members(room), "the bot to join on the principal's invite", timeout=120)
        _wait(lambda: _channel(ui)["ok"] is True, "the channel up", timeout=60)
        relay.close()  # the homeserver is gone: connections refused, the open ones cut
        relay.drop()
        try:
            down = _wait(lambda: (c := _channel(ui))["ok"] is False and _failed(c) >= 2 and c,
                         "two failed syncs shown", timeout=90)
            assert "Cannot connect to host" in down["detail"] and "next retry in" in down["detail"], down
            assert "Cannot connect to host" in down["last_error"] and "retries by itself" in down["fix"]

            port = int(ui.url.rsplit(":", 1)[1])
            jarvis_env.write_config(channels=channels, server={"port": port})
            _, doc = doctor(jarvis_env)
            seen = check(doc, "channel matrix")
            assert seen["ok"] is False and "down since" in seen["detail"] and "next retry in" in seen["detail"]
        finally:
            relay = Proxy(synapse.port, port=relay.port)  # back where it was
        try:
            _wait(lambda: _channel(ui)["ok"] is True, "the channel up again", timeout=180)
            alice.say(room, "/help")
            _wait(lambda: any(t.startswith("You are talking to Jarvis") for t in _texts(alice, room, bot)),
                  "the answer", timeout=60)
        finally:
            relay.close()
            relay.drop()


def test_a_password_login_while_the_homeserver_is_down_is_retried_with_the_sync_then_the_bot_answers(
        jarvis_env, cast, synapse, monkeypatch):
    relay = Proxy(synapse.port)
    relay.close()  # down before Jarvis starts: its login is refused
    monkeypatch.setenv("JARVIS_SECRET_MATRIX_PASSWORD", cast.bot.password)
    jarvis_env.write_config(channels={
        "matrix": {"enabled": True, "homeserver": f"http://127.0.0.1:{relay.port}", "user_id": cast.bot.user_id,
                   "password": {"secret": "matrix_password"}, "sync_timeout_s": 1, "edit_every_s": 0.2},
        "user_identities": [f"matrix:{cast.principal.user_id}"]})
    alice, bot = cast.principal, cast.bot.user_id
    room = alice.room_with(bot)
    with start_ui(jarvis_env, services=["orchestrator.server.services:matrix_inbound_service"]) as ui:
        down = _wait(lambda: (c := _channel(ui))["ok"] is False and "failed sync" in c["detail"] and c,
                     "the failed login shown", timeout=90)
        assert "Cannot connect to host" in down["detail"] and "next retry in" in down["detail"], down
        relay = Proxy(synapse.port, port=relay.port)  # the homeserver is back
        try:
            _wait(lambda: bot in alice.members(room), "the bot logged in, joined on the principal's invite",
                  timeout=180)
            assert _channel(ui)["ok"] is True
            alice.say(room, "/help")
            _wait(lambda: any(t.startswith("You are talking to Jarvis") for t in _texts(alice, room, bot)),
                  "the answer", timeout=60)
        finally:
            relay.close()
            relay.drop()
