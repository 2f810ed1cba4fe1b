"""[29] Exactly once across a crash: `jarvis run` killed with SIGKILL while a Telegram turn runs (after its write,
while the scripted model holds the answer), then started again. The message is reported in the chat once ("I was
stopped while answering ..."), never answered twice nor taken again, and the write it made is not repeated (the
effects ledger, the file)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import JARVIS_BIN, tool_call
from tests.test_approvals_remote import PRINCIPAL, _wait
from tests.test_telegram_chat import THREAD, _shown, telegram  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


def _run(jarvis_env, log: Path) -> subprocess.Popen:
    out = open(log, "w", encoding="utf-8")  # noqa: SIM115 - the process owns it until it ends
    return subprocess.Popen([str(JARVIS_BIN), "run", "--port", "0", "--no-open"], stdout=out, stderr=subprocess.STDOUT,
                            env=jarvis_env.env(), cwd=str(jarvis_env.path), stdin=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen, sig: int) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_a_turn_killed_mid_answer_is_reported_once_at_restart_and_its_write_not_repeated(jarvis_env, telegram):
    from orchestrator.tools.ledger import EffectsLedger

    jarvis_env.write_config(
        autonomy={"effects": {"fs_write": "auto"}},
        channels={"telegram": {"enabled": True, "token": {"secret": "telegram_token"}, "api_base": telegram.base_url,
                               "poll_timeout_s": 1},
                  "user_identities": [f"telegram:{PRINCIPAL}"]})
    target = jarvis_env.root / "out.txt"
    jarvis_env.server.push(tool_call("fs_write_text", path=str(target), content="hello"),
                           {"content": "la ", "endless": True})  # the answer held until the process dies
    telegram.state.say("write hello to out.txt", user_id=PRINCIPAL)
    first = _run(jarvis_env, jarvis_env.path / "run1.log")
    try:
        _wait(lambda: len(jarvis_env.server.requests) >= 2 and target.exists(), "the write, then the held answer",
              timeout=180)
        _wait(lambda: any("la la" in s for s in _shown(telegram)), "the answer shown as it is written", timeout=60)
    finally:
        _stop(first, signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    requests = len(jarvis_env.server.requests)

    second = _run(jarvis_env, jarvis_env.path / "run2.log")
    try:
        reported = _wait(lambda: [s for s in _shown(telegram) if s.startswith("I was stopped while answering")],
                         "the report of the stopped turn", timeout=180)
        telegram.state.say("/help", user_id=PRINCIPAL)  # the poller has gone past the stopped message
        _wait(lambda: _shown(telegram)[-1].startswith("You are talking to Jarvis"), "a later message answered",
              timeout=60)
    finally:
        _stop(second, signal.SIGINT)
    (note,) = reported
    assert note.startswith('I was stopped while answering "write hello to out.txt". Before that I had run: '
                           "fs_write_text (not run again).")
    assert [s for s in _shown(telegram) if s.startswith("I was stopped")] == [note]  # reported once
    assert len(jarvis_env.server.requests) == requests  # not answered again, not taken again
    assert target.read_text() == "hello" and EffectsLedger(jarvis_env.settings).count_for_thread(THREAD) == 1
    assert "Traceback" not in (jarvis_env.path / "run2.log").read_text()
