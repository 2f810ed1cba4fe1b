"""[29] Exactly once across a crash, over Matrix: `jarvis run` killed with SIGKILL while a Matrix turn runs (after its
write, while the scripted model holds the answer), then started again, against a real Synapse. The message is
reported in the room once ("I was stopped while answering ..."), never answered twice nor taken again (the event
synced again finds its record), and the write it made is not repeated (the effects ledger, the file)."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import tool_call
from tests.test_approvals_remote import _wait
from tests.test_matrix_chat import _texts, _thread_ids, cast, synapse  # noqa: F401 - fixtures
from tests.test_telegram_crash import _run, _stop

pytestmark = pytest.mark.slow


def test_a_matrix_turn_killed_mid_answer_is_reported_once_at_restart_and_its_write_not_repeated(jarvis_env, cast,
                                                                                                  synapse):
    from orchestrator.tools.ledger import EffectsLedger

    jarvis_env.write_config(autonomy={"effects": {"fs_write": "auto"}}, channels={
        "matrix": {"enabled": True, "homeserver": synapse.url, "user_id": cast.bot.user_id,
                   "access_token": {"secret": "matrix_token"}, "sync_timeout_s": 1, "edit_every_s": 0.2},
        "user_identities": [f"matrix:{cast.principal.user_id}"]})
    alice, bot = cast.principal, cast.bot.user_id
    target = jarvis_env.root / "out.txt"
    room = alice.room_with(bot)
    first = _run(jarvis_env, jarvis_env.path / "run1.log")
    try:
        _wait(lambda: bot in alice.members(room), "the bot to join on the principal's invite", timeout=180)
        jarvis_env.server.push(tool_call("fs_write_text", path=str(target), content="hello"),
                               {"content": "la ", "endless": True})  # the answer held until the process dies
        alice.say(room, "write hello to out.txt")
        _wait(lambda: len(jarvis_env.server.requests) >= 2 and target.exists(), "the write, then the held answer",
              timeout=180)
        _wait(lambda: any("la la" in t for t in _texts(alice, room, bot)), "the answer shown as it is written",
              timeout=60)
    finally:
        _stop(first, signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    requests = len(jarvis_env.server.requests)

    second = _run(jarvis_env, jarvis_env.path / "run2.log")
    try:
        reported = _wait(lambda: [t for t in _texts(alice, room, bot) if t.startswith("I was stopped while answering")],
                         "the report of the stopped turn", timeout=180)
        alice.say(room, "/help")  # the sync has gone past the stopped message
        _wait(lambda: _texts(alice, room, bot)[-1].startswith("You are talking to Jarvis"), "a later message answered",
              timeout=60)
    finally:
        _stop(second, signal.SIGINT)
    (note,) = reported
    assert note.startswith('I was stopped while answering "write hello to out.txt". Before that I had run: '
                           "fs_write_text (not run again).")
    assert [t for t in _texts(alice, room, bot) if t.startswith("I was stopped")] == [note]  # reported once
    assert len(jarvis_env.server.requests) == requests  # not answered again, not taken again
    (thread,) = [t for t in _thread_ids(jarvis_env) if t.startswith("matrix-")]
    assert target.read_text() == "hello" and EffectsLedger(jarvis_env.settings).count_for_thread(thread) == 1
    assert "Traceback" not in (jarvis_env.path / "run2.log").read_text()
