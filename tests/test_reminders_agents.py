"""Agents over STDIO JSON-RPC (seed 001): the seed's own agent unchanged, reuse of the process, create requests and
their rate limit, garbage output, crashes, and agents that never ACK. Real subprocesses, real SQLite."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest

from orchestrator.reminders import FAILED, PENDING, SENT, ReminderRequest, ReminderStore
from orchestrator.reminders.scheduler import Scheduler
from orchestrator.reminders.models import utcnow
from tests.reminder_helpers import (
    RECORDING_AGENT, SEED_AGENT, read_record, settings_for, wait_for, write_agent,
)


@pytest.fixture
def make_scheduler():
    started: list[Scheduler] = []

    def make(settings, **kwargs):
        s = Scheduler(settings, **kwargs)
        s.start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def _status(store: ReminderStore, rid: str) -> str:
    r = store.get(rid)
    return r.status if r else "missing"


def test_seed_agent_acks_and_schedules_a_follow_up_with_unicode(jarvis_env, tmp_path, make_scheduler):
    settings = settings_for(jarvis_env, max_creates_per_hour=1)
    agent = write_agent(tmp_path / "echo_agent.py", SEED_AGENT)
    sched = make_scheduler(settings)
    title = "Ping agent — café ☕ 日本"
    r = sched.store.create(ReminderRequest(title=title, when=utcnow().isoformat(), process_name=str(agent)))

    wait_for(lambda: _status(sched.store, r.id) == SENT)
    follow = wait_for(lambda: [x for x in sched.store.list() if x.title == f"Follow‑up for {title}"])
    assert len(follow) == 1
    f = follow[0]
    # Defaults per seed 001: the current agent is the target; the naive `when` is UTC (= the original due date).
    assert f.process_name == str(agent.resolve())
    assert f.due_date.replace(microsecond=0) == r.due_date.replace(microsecond=0)
    assert f.created_by == f"agent:{agent.resolve()}"
    # The follow-up fires into the same agent, which asks for another one: refused by the rate limit of 1/hour.
    wait_for(lambda: _status(sched.store, f.id) == SENT)
    assert sched.wait_idle(60)  # the refused follow-up's delivery has ended, whatever the machine's load
    titles = [x.title for x in sched.store.list()]
    assert f"Follow‑up for Follow‑up for {title}" not in titles
    assert len(titles) == 2


def test_agent_is_spawned_once_and_gets_answers_to_its_requests(jarvis_env, tmp_path, make_scheduler):
    settings = settings_for(jarvis_env, max_creates_per_hour=2, agents_may_target=["http://127.0.0.1:9/"])
    agent = write_agent(tmp_path / "recorder.py", RECORDING_AGENT)
    record = tmp_path / "recorder.py.log"
    sched = make_scheduler(settings)
    requests = [
        {"jsonrpc": "2.0", "id": 7, "method": "reminders.create",
         "params": {"title": "next één", "when": "2030-06-01T09:00:00", "rrule": None}},
        {"jsonrpc": "2.0", "id": "b", "method": "reminders.create",
         "params": {"title": "hook", "when": "2030-06-01T10:00:00Z", "webhook_url": "http://127.0.0.1:9/x"}},
        {"jsonrpc": "2.0", "id": "c", "method": "reminders.create", "params": {"title": "one too many",
                                                                            "when": "2030-06-01T11:00:00Z"}},
        {"jsonrpc": "2.0", "id": "d", "method": "reminders.list", "params": {}},
        {"jsonrpc": "2.0", "id": "e", "method": "reminders.create", "params": {"title": ""}},
    ]
    first = sched.store.create(ReminderRequest(title="go", when=utcnow().isoformat(), process_name=str(agent),
                                               description=json.dumps(requests)))
    second = sched.store.create(ReminderRequest(title="again", when=utcnow().isoformat(), process_name=str(agent)))
    wait_for(lambda: _status(sched.store, first.id) == SENT and _status(sched.store, second.id) == SENT)

    answers = wait_for(lambda: {m["msg"].get("id"): m["msg"] for m in read_record(record)
                                if "method" not in m["msg"]} if len(read_record(record)) >= 7 else None)
    pids = {m["pid"] for m in read_record(record)}
    assert len(pids) == 1, "the agent process is reused for every reminder"
    fires = [m["msg"] for m in read_record(record) if m["msg"].get("method") == "reminder.fire"]
    assert {f["params"]["title"] for f in fires} == {"go", "again"}
    assert all("id" not in f and f["jsonrpc"] == "2.0" for f in fires), "reminder.fire is a notification"
    assert set(fires[0]["params"]) == {"reminder_id", "title", "description", "due_date", "project_id", "priority"}

    created = sched.store.get(answers[7]["result"]["id"])
    assert answers[7]["jsonrpc"] == "2.0" and created.title == "next één"
    assert created.due_date.isoformat() == "2030-06-01T09:00:00+00:00"  # naive is UTC for agents
    assert created.process_name == str(agent.resolve())
    hook = sched.store.get(answers["b"]["result"]["id"])
    assert hook.webhook_url == "http://127.0.0.1:9/x" and hook.process_name is None
    assert answers["c"]["error"]["code"] == -32000 and "rate limit" in answers["c"]["error"]["message"]
    assert answers["d"]["error"]["code"] == -32601
    assert answers["e"]["error"]["code"] == -32602 and "when" in answers["e"]["error"]["message"]
    assert "one too many" not in [x.title for x in sched.store.list()]


GARBAGE_AGENT = r'''
import json, sys
out = sys.stdout.buffer
for line in sys.stdin:
    msg = json.loads(line)
    out.write(b"hello, I am not JSON\n")
    out.write(b"\xff\xfe broken utf-8 {\n")
    out.write(b"[1, 2, 3]\n")
    out.write(b'"just a string"\n')
    out.write(b'{"no": "method or result"}\n')
    out.write(b"\n")
    out.write(b'{"jsonrpc": "2.0", "result": "ok", "id": null}\n')
    out.flush()
    sys.stderr.write("stderr says hi ✓\n"); sys.stderr.flush()
'''


def test_garbage_lines_are_logged_and_skipped(jarvis_env, tmp_path, make_scheduler, caplog):
    caplog.set_level(logging.INFO, logger="orchestrator.reminders")
    settings = settings_for(jarvis_env)
    agent = write_agent(tmp_path / "garbage.py", GARBAGE_AGENT)
    sched = make_scheduler(settings)
    rs = [sched.store.create(ReminderRequest(title=f"g{i}", when=utcnow().isoformat(), process_name=str(agent)))
          for i in range(2)]
    wait_for(lambda: all(_status(sched.store, r.id) == SENT for r in rs))
    text = caplog.text
    assert "not JSON: 'hello, I am not JSON'" in text
    assert "broken utf-8" in text
    assert "not a JSON-RPC object: [1, 2, 3]" in text
    assert "neither method nor result" in text
    wait_for(lambda: "stderr says hi ✓" in caplog.text)
    assert all(sched.store.get(r.id).attempts == 1 for r in rs)


CRASH_ONCE_AGENT = r'''
import json, os, sys
marker = sys.argv[0] + ".crashed"
for line in sys.stdin:
    if not os.path.exists(marker):
        open(marker, "w").close()
        sys.stderr.write("boom: cannot handle this\n"); sys.stderr.flush()
        sys.exit(3)
    with open(sys.argv[0] + ".pids", "a") as f:
        f.write(f"{os.getpid()}\n")
    print(json.dumps({"jsonrpc": "2.0", "result": "ok", "id": None}), flush=True)
'''

ALWAYS_CRASH_AGENT = r'''
import sys
sys.stdin.readline()
sys.stderr.write("Traceback: ZeroDivisionError: division by zero\n"); sys.stderr.flush()
sys.exit(3)
'''

SILENT_AGENT = r'''
import sys, time
for line in sys.stdin:
    time.sleep(60)
'''


def test_crashed_agent_is_restarted_and_the_reminder_retried(jarvis_env, tmp_path, make_scheduler):
    settings = settings_for(jarvis_env)
    agent = write_agent(tmp_path / "crashy.py", CRASH_ONCE_AGENT)
    sched = make_scheduler(settings)
    r = sched.store.create(ReminderRequest(title="retry me", when=utcnow().isoformat(), process_name=str(agent)))
    wait_for(lambda: _status(sched.store, r.id) == SENT)
    done = sched.store.get(r.id)
    assert done.attempts == 2
    assert (tmp_path / "crashy.py.crashed").exists()
    assert sched.agents.agent(str(agent.resolve())).starts == 2


def test_agent_that_always_crashes_fails_with_the_reason(jarvis_env, tmp_path, make_scheduler):
    settings = settings_for(jarvis_env, max_attempts=3)
    agent = write_agent(tmp_path / "dies.py", ALWAYS_CRASH_AGENT)
    sched = make_scheduler(settings)
    r = sched.store.create(ReminderRequest(title="doomed", when=utcnow().isoformat(), process_name=str(agent)))
    wait_for(lambda: _status(sched.store, r.id) == FAILED)
    failed = sched.store.get(r.id)
    assert failed.attempts == 3
    assert "exited with code 3" in failed.last_error and "ZeroDivisionError" in failed.last_error
    assert "gave up after 3 attempts" in failed.last_error


def test_agent_that_never_acks_is_stopped_and_the_reminder_fails(jarvis_env, tmp_path, make_scheduler):
    settings = settings_for(jarvis_env, max_attempts=2, ack_timeout_s=0.5)
    agent = write_agent(tmp_path / "silent.py", SILENT_AGENT)
    sched = make_scheduler(settings)
    r = sched.store.create(ReminderRequest(title="hello?", when=utcnow().isoformat(), process_name=str(agent)))
    wait_for(lambda: _status(sched.store, r.id) == FAILED)
    failed = sched.store.get(r.id)
    assert "no ACK" in failed.last_error and failed.attempts == 2
    proc = sched.agents.agent(str(agent.resolve()))
    assert proc.starts == 2
    assert proc._run is not None and proc._run.proc.poll() is not None, "the silent agent was stopped"


def test_missing_agent_retries_then_fails_and_never_blocks_others(jarvis_env, tmp_path, make_scheduler):
    settings = settings_for(jarvis_env, max_attempts=2)
    agent = write_agent(tmp_path / "gone.py", SILENT_AGENT)
    good = write_agent(tmp_path / "good.py", SEED_AGENT)
    store = ReminderStore(settings)
    r = store.create(ReminderRequest(title="to a gone agent", when=utcnow().isoformat(), process_name=str(agent)))
    agent.unlink()  # deleted after the reminder was made
    ok = store.create(ReminderRequest(title="fine", when=utcnow().isoformat(), process_name=str(good)))
    _scheduler = make_scheduler(settings, store=store)  # kept alive while the test waits
    wait_for(lambda: _status(store, r.id) == FAILED and _status(store, ok.id) == SENT)
    assert "cannot start agent" in store.get(r.id).last_error


def test_stop_leaves_unacked_reminder_pending_without_using_an_attempt(jarvis_env, tmp_path):
    settings = settings_for(jarvis_env, ack_timeout_s=30)
    agent = write_agent(tmp_path / "slow.py", SILENT_AGENT)
    sched = Scheduler(settings)
    sched.start()
    r = sched.store.create(ReminderRequest(title="interrupted", when=utcnow().isoformat(), process_name=str(agent)))
    wait_for(lambda: sched.agents.agent(str(agent.resolve())).starts == 1)
    sched.stop()
    left = sched.store.get(r.id)
    assert left.status == PENDING and left.attempts == 0
    assert left.fire_at <= utcnow() + timedelta(seconds=1), "it fires again as soon as a scheduler runs"


def test_a_hung_agent_holds_up_only_its_own_reminders(jarvis_env, tmp_path, make_scheduler):
    woken: list[str] = []
    settings = settings_for(jarvis_env, workers=1, ack_timeout_s=5, max_attempts=1)
    agent = write_agent(tmp_path / "hung.py", SILENT_AGENT)
    sched = make_scheduler(settings, wake_jorb=lambda jorb_id, event: woken.append(event.title))
    stuck = sched.store.create(ReminderRequest(title="stuck", when=utcnow().isoformat(), process_name=str(agent)))
    wait_for(lambda: sched.agents.agent(str(agent.resolve())).starts == 1)
    other = sched.store.create(ReminderRequest(title="unrelated", when=utcnow().isoformat(), jorb_id="j"))
    sched.wake()
    wait_for(lambda: _status(sched.store, other.id) == SENT, timeout=60)
    assert _status(sched.store, stuck.id) == PENDING, "the hung agent is still waited for"
    wait_for(lambda: _status(sched.store, stuck.id) == FAILED, timeout=60)
    assert woken == ["unrelated"]


def test_an_agents_reminders_come_back_to_it_unless_the_config_says_where_else(jarvis_env, tmp_path, make_scheduler):
    """An agent's `reminders.create` could name any program (started at fire time, outside every sandbox) or any
    URL (169.254.169.254, a service on localhost): the question the planner's reminders get (process_start,
    network) was never asked. Another program or a webhook is refused now unless scheduler.agents_may_target lists
    it, the URL matched by scheme, host and port, not as a string prefix."""
    marker = tmp_path / "PWNED"
    other = write_agent(tmp_path / "other.py", f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n")
    listed = write_agent(tmp_path / "listed.py", SEED_AGENT)
    settings = settings_for(jarvis_env, agents_may_target=[str(listed), "http://127.0.0.1:8070/agent"])
    agent = write_agent(tmp_path / "recorder.py", RECORDING_AGENT)
    record = tmp_path / "recorder.py.log"
    sched = make_scheduler(settings)
    asks = {"other": {"process_name": str(other)}, "touch": {"process_name": f"/usr/bin/touch {marker}"},
            "metadata": {"webhook_url": "http://169.254.169.254/latest/meta-data/"},
            "lookalike": {"webhook_url": "http://127.0.0.1:8070.evil.example/agent/7"},
            "sibling": {"webhook_url": "http://127.0.0.1:8070/agentx"},
            "listed_hook": {"webhook_url": "http://127.0.0.1:8070/agent/7"},
            "listed_program": {"process_name": str(listed)}, "itself": {"process_name": str(agent)}}
    requests = [{"jsonrpc": "2.0", "id": key, "method": "reminders.create",
                 "params": {"title": key, "when": "2030-06-01T09:00:00Z", **target}} for key, target in asks.items()]
    first = sched.store.create(ReminderRequest(title="go", when=utcnow().isoformat(), process_name=str(agent),
                                               description=json.dumps(requests)))
    wait_for(lambda: _status(sched.store, first.id) == SENT)
    answers = wait_for(lambda: {m["msg"].get("id"): m["msg"] for m in read_record(record) if "method" not in m["msg"]
                                and m["msg"].get("id") in asks} if len(read_record(record)) >= 1 + len(asks) else None)
    for refused in ("other", "touch", "metadata", "lookalike", "sibling"):
        error = answers[refused].get("error") or {}
        assert error.get("code") == -32602 and "agents_may_target" in error.get("message", ""), (refused, answers[refused])
    for allowed in ("listed_hook", "listed_program", "itself"):
        assert sched.store.get(answers[allowed]["result"]["id"]) is not None, answers[allowed]
    titles = {r.title for r in sched.store.list(limit=50)}
    assert not titles & {"other", "touch", "metadata", "lookalike", "sibling"}, titles
    assert not marker.exists()
