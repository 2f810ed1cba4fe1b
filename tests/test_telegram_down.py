"""[29] A channel that is down: the Bot API answering 502, then refusing connections, then back. `jarvis run`'s
Telegram poller retries with a capped, jittered backoff (no hot loop), /api/health and `jarvis doctor` show the
channel down with its last error and next retry, and once the Bot API is back the user's messages are answered."""

from __future__ import annotations

import pytest

from tests.test_approvals_remote import PRINCIPAL, _wait
from tests.test_doctor import check, doctor
from tests.test_telegram_chat import _shown, telegram  # noqa: F401 - fixture
from tests.ui_server import start_ui

pytestmark = pytest.mark.slow


def _channel(ui) -> dict:
    with ui.client() as c:
        return check(c.get("/api/health").json(), "channel telegram")


def _polls(telegram) -> int:
    return sum(1 for method, _ in list(telegram.state.calls) if method == "getUpdates")


def test_telegram_down_is_retried_with_backoff_shown_in_health_and_doctor_then_back(jarvis_env, telegram):
    channels = {"telegram": {"enabled": True, "token": {"secret": "telegram_token"}, "api_base": telegram.base_url,
                             "poll_timeout_s": 1},
                "user_identities": [f"telegram:{PRINCIPAL}"]}
    jarvis_env.write_config(channels=channels)
    with start_ui(jarvis_env, services=["orchestrator.server.services:telegram_inbound_service"]) as ui:
        _wait(lambda: _channel(ui)["ok"] is True, "the channel up", timeout=60)
        telegram.state.down = 502
        before = _polls(telegram)
        down = _wait(lambda: (c := _channel(ui))["ok"] is False and "(2 failed polls)" in c["detail"] and c,
                     "two failed polls shown", timeout=90)
        assert "Telegram answered HTTP 502" in down["detail"] and "next retry in" in down["detail"]
        assert down["last_error"] == "Telegram answered HTTP 502" and "retries by itself" in down["fix"]
        # each failed poll is the client's 4 tries; between polls the wait doubles: no hot loop
        assert _polls(telegram) - before <= 4 * 3, _polls(telegram) - before

        port = int(ui.url.rsplit(":", 1)[1])
        jarvis_env.write_config(channels=channels, server={"port": port})
        _, doc = doctor(jarvis_env)
        seen = check(doc, "channel telegram")
        assert seen["ok"] is False and "down since" in seen["detail"] and "next retry in" in seen["detail"]

        telegram.refuse()
        try:
            _wait(lambda: "cannot reach Telegram: ConnectError" in _channel(ui)["detail"], "refused connections shown",
                  timeout=180)
        finally:
            telegram.state.down = None
            telegram.reopen()
        _wait(lambda: _channel(ui)["ok"] is True, "the channel up again", timeout=180)
        telegram.state.say("/help", user_id=PRINCIPAL)
        _wait(lambda: any(s.startswith("You are talking to Jarvis") for s in _shown(telegram)), "the answer",
              timeout=60)


def test_the_backoff_doubles_is_capped_and_jittered():
    from orchestrator.channels.retrying import RETRY_FIRST_S, RETRY_MAX_S, retry_delay

    for failures, floor in ((1, 1), (2, 2), (3, 4), (6, 32)):
        waits = [retry_delay(failures) for _ in range(50)]
        assert all(floor * RETRY_FIRST_S <= w <= floor * RETRY_FIRST_S + RETRY_FIRST_S for w in waits)
        assert len(set(waits)) > 1  # jittered: workers restarted together do not retry in step
    assert {retry_delay(n) for n in (7, 20, 10_000)} == {RETRY_MAX_S}
