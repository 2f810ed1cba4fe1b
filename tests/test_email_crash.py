"""[29] Exactly once across a crash, by email: `jarvis run` killed with SIGKILL while the turn of the user's mail
runs (after its write, while the scripted model holds the answer), then started again, against the local Gmail
server. The mail is reported in its thread once ("I was stopped while answering ..."), never answered twice nor
taken again, and the write it made is not repeated (the effects ledger, the file)."""

from __future__ import annotations

import base64
import signal
from email import message_from_bytes

import pytest

from tests.conftest import tool_call
from tests.test_approvals_remote import VERIFIED, _wait
from tests.test_email_chat import ME, mail  # noqa: F401 - fixture
from tests.test_telegram_crash import _run, _stop

pytestmark = pytest.mark.slow


def _answers(google) -> list[str]:
    return [message_from_bytes(base64.urlsafe_b64decode(s["raw"] + "==")).get_payload(decode=True).decode().strip()
            for s in google.sent]


def test_a_turn_killed_mid_answer_is_reported_once_in_the_thread_at_restart(jarvis_env, mail):
    from orchestrator.channels.models import ChannelState
    from orchestrator.tools.ledger import EffectsLedger

    jarvis_env.write_config(
        autonomy={"effects": {"fs_write": "auto"}},
        channels={"email": {"enabled": True, "chat": True, "poll_interval_s": 0.5}, "user_identities": [ME]},
        google={"gmail_base_url": mail.url, "calendar_base_url": mail.url, "token_uri": mail.token_uri,
                "backoff_s": 0.01})
    ChannelState(jarvis_env.settings, "email").set("own_since", "1")  # the conversation by email was on before
    target = jarvis_env.root / "out.txt"
    jarvis_env.server.push(tool_call("fs_write_text", path=str(target), content="hello"),
                           {"content": "la ", "endless": True})  # the answer held until the process dies
    asked = mail.add_message(sender=f"Boss <{ME}>", subject="a file", body="write hello to out.txt",
                             authentication_results=VERIFIED)
    thread = f"email-{asked['threadId']}"
    first = _run(jarvis_env, jarvis_env.path / "run1.log")
    try:
        _wait(lambda: len(jarvis_env.server.requests) >= 2 and target.exists(), "the write, then the held answer",
              timeout=180)
    finally:
        _stop(first, signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL and mail.sent == []  # killed before any answer left
    requests = len(jarvis_env.server.requests)

    second = _run(jarvis_env, jarvis_env.path / "run2.log")
    try:
        _wait(lambda: _answers(mail), "the report of the stopped turn", timeout=180)
        mail.add_message(sender=f"Boss <{ME}>", subject="later", body="hello again", authentication_results=VERIFIED)
        jarvis_env.server.push({"content": "Hello."})
        _wait(lambda: "Hello." in _answers(mail), "a later mail answered", timeout=60)
    finally:
        _stop(second, signal.SIGINT)
    note = _answers(mail)[0]
    assert note.startswith('I was stopped while answering "write hello to out.txt". Before that I had run: '
                           "fs_write_text (not run again).")
    assert mail.sent[0]["threadId"] == asked["threadId"]  # in the mail's own thread
    assert [a for a in _answers(mail) if a.startswith("I was stopped")] == [note]  # reported once
    assert len(jarvis_env.server.requests) == requests + 1  # the stopped mail not answered again, not taken again
    assert target.read_text() == "hello" and EffectsLedger(jarvis_env.settings).count_for_thread(thread) == 1
    assert "Traceback" not in (jarvis_env.path / "run2.log").read_text()
