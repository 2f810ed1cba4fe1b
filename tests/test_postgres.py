"""PostgreSQL storage ([11]): with storage.url every table and the checkpointer live in one PostgreSQL database,
so several workers share threads, jorbs and reminders; a jorb is resumed by exactly one worker. Runs against a
real server (tests/pg_server.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from tests.conftest import REPO, answer, tool_call

pytestmark = pytest.mark.postgres


def _pg(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def test_a_chat_thread_lives_in_postgres_and_other_processes_see_it(pg_env):
    srv = pg_env.server
    (pg_env.root / "notes.txt").write_text("hello")
    srv.push(tool_call("fs_list_dir", path=str(pg_env.root)), answer("You have notes.txt."))
    graph = pg_env.graph()
    config = {"configurable": {"thread_id": "pg-chat"}}
    out = graph.invoke({"messages": [("user", "what files do I have?")]}, config)
    assert out["messages"][-1].content == "You have notes.txt."
    for i in range(3):
        srv.push(answer(f"answer {i}"))
        graph.invoke({"messages": [("user", f"question {i}")]}, config)

    # Nothing went to SQLite files: the checkpoints and the tables are in the database.
    from orchestrator.storage import writer

    writer.flush()  # the thread's row is bookkeeping, written in the background
    assert not list(pg_env.data.glob("jarvis.sqlite*")) and not list(pg_env.data.glob("checkpoints.sqlite*"))
    with _pg(pg_env.pg_url) as conn:
        (checkpoints,) = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'pg-chat'").fetchone()
        (indexed,) = conn.execute("SELECT COUNT(*) FROM threads WHERE thread_id = 'pg-chat'").fetchone()
    assert checkpoints > 4 and indexed == 1

    # Another process (the CLI) reads the same thread from the database ...
    listed = pg_env.cli_json("threads", "list", "--json")
    assert "pg-chat" in [t["thread_id"] for t in listed]
    shown = pg_env.cli_json("threads", "show", "pg-chat", "--json")
    assert [m["content"] for m in shown["messages"] if m["type"] == "ai" and m["content"]][-1] == "answer 2"
    # ... and prunes it: old checkpoints and the channel blobs only they used go; the thread still reads.
    proc = pg_env.cli("threads", "prune", "--keep", "1")
    assert proc.returncode == 0, proc.stderr
    match = re.search(r"removed (\d+) checkpoints from \d+ threads, freeing (\d+) bytes", proc.stdout)
    assert match and int(match.group(1)) >= 4 and int(match.group(2)) > 1000, proc.stdout
    with _pg(pg_env.pg_url) as conn:
        (left,) = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'pg-chat' "
                               "AND checkpoint_ns = ''").fetchone()
    assert left == 1
    srv.push(answer("still here"))
    out = pg_env.graph().invoke({"messages": [("user", "and now?")]}, config)
    assert out["messages"][-1].content == "still here"
    assert [m.content for m in out["messages"] if m.type == "human"][0] == "what files do I have?"


@pytest.mark.parametrize("keep", [1, 3])
def test_a_turn_s_trim_that_runs_before_its_last_checkpoint_keeps_what_that_checkpoint_needs(pg_env, monkeypatch, keep):
    """The trim a turn queues runs on the background writer, on a busy machine before the turn's last checkpoint
    is written: it counts that checkpoint among the kept, keeps the one it comes from (whose channel blobs the
    new one shares), and the thread reads whole afterwards."""
    from types import SimpleNamespace

    from orchestrator.storage import checkpoints

    pg_env.write_config(storage={"url": pg_env.pg_url, "keep_checkpoints": keep})
    monkeypatch.setattr(checkpoints, "writer", SimpleNamespace(submit=lambda job: job()))
    graph = pg_env.graph()
    config = {"configurable": {"thread_id": "pg-trim"}}
    for i in range(3):
        pg_env.server.push(answer(f"answer {i}"))
        graph.invoke({"messages": [("user", f"question {i}")]}, config)
    with _pg(pg_env.pg_url) as conn:
        (left,) = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'pg-trim' "
                               "AND checkpoint_ns = ''").fetchone()
    assert left == max(keep, 2)  # keep 1: the one the last step came from stays until the next turn's trim
    pg_env.server.push(answer("still here"))
    out = pg_env.graph().invoke({"messages": [("user", "and now?")]}, config)
    assert out["messages"][-1].content == "still here"
    assert [m.content for m in out["messages"] if m.type == "human"] == [
        "question 0", "question 1", "question 2", "and now?"]


def test_a_confirmation_parked_by_one_process_is_approved_from_another(pg_env):
    pg_env.write_config(storage={"url": pg_env.pg_url}, autonomy={"effects": {"fs_write": "confirm"}})
    target = pg_env.root / "x.txt"
    pg_env.server.push(tool_call("fs_write_text", path=str(target), content="from postgres"), answer("Written."))
    pg_env.graph().invoke({"messages": [("user", "write it")]}, {"configurable": {"thread_id": "pg-confirm"}})
    assert not target.exists()
    pending = pg_env.cli_json("pending", "--json")
    assert [p["thread_id"] for p in pending] == ["pg-confirm"]
    proc = pg_env.cli("approve", "pg-confirm", "--all")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert target.read_text() == "from postgres"


def test_two_workers_resume_a_hundred_jorbs_each_exactly_once(pg_env, tmp_path):
    """100 jorbs wait for a reply; the replies come in while no worker runs; two worker processes (two threads
    each) start on the same database at once. Every jorb is resumed once, by one of them."""
    from tests.app_helpers import jorb_service

    decisions = tmp_path / "decisions.jsonl"
    env = {**pg_env.env(), "JARVIS_TEST_DECISIONS": str(decisions)}
    os.environ["JARVIS_TEST_DECISIONS"] = str(decisions)
    svc = jorb_service(pg_env.settings, llm=object())
    policy = "heuristic:tests.helpers.jorb_worker:ask_then_finish"
    ids = [svc.create(f"Ask {i}", "Ask Alice and wait for her answer", contacts=["alice@example.com"],
                      policy=policy).row.id for i in range(100)]
    assert {svc.store.get(j).status for j in ids} == {"awaiting_reply"}
    for i, jorb_id in enumerate(ids):
        svc.store.log_message(direction="in", channel="email", party="alice@example.com", text=f"yes {i}",
                              status="pending", jorb_id=jorb_id)
    del os.environ["JARVIS_TEST_DECISIONS"]

    argv = [sys.executable, "-m", "tests.helpers.jorb_worker", str(pg_env.config_path), "2"]
    workers = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                cwd=str(REPO)) for _ in range(2)]
    outputs = []
    for w in workers:
        out, err = w.communicate(timeout=600)
        assert w.returncode == 0, err[-3000:]
        outputs.append(json.loads(out.strip().splitlines()[-1]))

    resumed = [set(o["resumed"]) for o in outputs]
    assert resumed[0] | resumed[1] == set(ids)
    assert not resumed[0] & resumed[1]
    lines = [json.loads(line) for line in decisions.read_text().splitlines()]
    replies = Counter(d["jorb"] for d in lines if d["event"] == "reply")
    assert replies == Counter({j: 1 for j in ids})  # one decision on the reply per jorb: no double resume
    worker_pids = {o["pid"] for o in outputs}
    assert {d["pid"] for d in lines if d["event"] == "reply"} <= worker_pids
    fresh = jorb_service(pg_env.settings, llm=object())
    for jorb_id in ids:
        row = fresh.store.get(jorb_id)
        assert row.status == "done" and row.result in {f"pid {p}" for p in worker_pids}
        assert [m.status for m in fresh.store.messages(jorb_id=jorb_id, direction="in")] == ["delivered"]
    # Both workers did a share of the work (the claims split it; neither waited for the other to finish).
    assert all(resumed), [len(r) for r in resumed]


def test_a_jorb_running_in_one_worker_is_not_run_by_another(pg_env):
    from orchestrator.storage.claims import Claims
    from tests.app_helpers import jorb_service
    from orchestrator.jorbs.service import JorbBusy

    svc = jorb_service(pg_env.settings, llm=object())
    row = svc.store.create(name="Busy", plan="p")
    other = Claims(pg_env.settings, worker="elsewhere:1:abc")
    assert other.acquire(row.thread_id)
    with pytest.raises(JorbBusy, match="another worker \\(elsewhere:1:abc\\)"):
        svc.run(row.id, {"jorb_id": row.id})
    assert svc.recover() == []  # "planning" but held by a live worker: not a leftover
    other.release(row.thread_id)
    assert svc.claims.acquire(row.thread_id)
    assert not other.acquire(row.thread_id)


def test_two_schedulers_share_due_reminders_without_double_delivery(pg_env):
    """Two workers claim due reminders from one database at the same time: each reminder goes to one."""
    from concurrent.futures import ThreadPoolExecutor

    from orchestrator.reminders.store import ReminderStore

    settings = pg_env.settings
    store = ReminderStore(settings)
    now = datetime.now(timezone.utc)
    from orchestrator.reminders.spec import ReminderRequest

    for i in range(200):
        store.create(ReminderRequest(title=f"r{i}", when=(now + timedelta(seconds=1)).isoformat(), thread_id="t"),
                     now=now)
    now = now + timedelta(seconds=2)

    def claim(_: int) -> list[str]:
        mine = []
        worker = ReminderStore(settings)
        while batch := worker.claim_due(now, now + timedelta(minutes=5), 7, 3600):
            mine.extend(r.id for r in batch)
        return mine

    with ThreadPoolExecutor(4) as pool:
        shares = list(pool.map(claim, range(4)))
    claimed = [r for share in shares for r in share]
    assert len(claimed) == 200 and len(set(claimed)) == 200


def test_an_unreachable_database_is_a_clear_error(jarvis_env):
    jarvis_env.write_config(storage={"url": "postgresql://jarvis@127.0.0.1:9/jarvis"})
    proc = jarvis_env.cli("threads", "list")
    assert proc.returncode == 1
    assert "cannot use PostgreSQL at 127.0.0.1:9/jarvis (storage.url)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_tool_built_on_one_machine_runs_on_another(pg_env, tmp_path):
    """Two workers with their own tools folders (two machines) share the registry in PostgreSQL: the tool one
    registered runs (and is re-tested) on the other from the registry's copy of its source and tests; a changed
    file is still refused."""
    from orchestrator.jarb.tools import generated_provider
    from tests.jarb_helpers import FIXED_WORD_COUNT, WORD_COUNT_SPEC, WORD_COUNT_TESTS

    src = tmp_path / "src"
    src.mkdir()
    (src / "spec.json").write_text(json.dumps(WORD_COUNT_SPEC))
    (src / "good.py").write_text(FIXED_WORD_COUNT)
    (src / "tests.py").write_text(WORD_COUNT_TESTS)
    done = pg_env.cli("tools", "register", "--spec", str(src / "spec.json"), "--module", str(src / "good.py"),
                      "--tests", str(src / "tests.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    module = pg_env.path / "tools" / "word_count_v1.py"
    assert module.exists()
    # Machine B has no such file (it was written on machine A): it runs from the registry's copy.
    module.rename(tmp_path / "elsewhere.py")
    other = pg_env.settings.model_copy(update={"tools_dir": tmp_path / "machine-b-tools"})
    provider = generated_provider(other)
    tool = next(t for t in provider.list_tools() if t.name == "word_count")
    assert tool.invoke({"text": "one two three"}) == 3
    # Its tests run there too, from the registry's copy.
    tests_file = pg_env.path / "tools" / "tests" / "test_word_count_v1.py"
    tests_file.rename(tmp_path / "elsewhere_tests.py")
    retested = pg_env.cli("tools", "test", "word_count")
    assert retested.returncode == 0 and "passed" in retested.stdout, retested.stdout + retested.stderr

    # Where the file is present, a changed file is refused as before.
    module.write_text(FIXED_WORD_COUNT + "\nimport os\n")
    here = generated_provider(pg_env.settings)
    assert "word_count" not in [t.name for t in here.list_tools()]
    assert "changed after registration" in here.refused["word_count"]


def test_two_workers_polling_one_mailbox_deliver_each_email_once(pg_env):
    """The email poller marks a message seen with an insert-if-absent: of several workers polling the same
    threads, one delivers it."""
    from concurrent.futures import ThreadPoolExecutor

    from orchestrator.channels.models import ChannelState

    settings = pg_env.settings
    keys = [f"seen:msg{i}" for i in range(100)]

    def poll(_: int) -> list[str]:
        state = ChannelState(settings, "email")
        return [k for k in keys if state.claim(k)]

    with ThreadPoolExecutor(4) as pool:
        shares = list(pool.map(poll, range(4)))
    delivered = [k for share in shares for k in share]
    assert sorted(delivered) == sorted(keys)


def test_a_chat_thread_answered_by_one_worker_is_busy_for_the_others(pg_env):
    from orchestrator.storage.claims import Claims
    from orchestrator.chat.live_turns import TurnBusy, TurnHub

    pg_env.server.push(answer("hello from this worker"))
    other = Claims(pg_env.settings, worker="elsewhere:7:xyz")
    hub = TurnHub(pg_env.graph(), claims=Claims(pg_env.settings))
    assert other.acquire("shared-thread")
    with pytest.raises(TurnBusy) as busy:
        hub.start("shared-thread", {"messages": [("user", "hi")]})
    assert busy.value.elsewhere == "elsewhere:7:xyz"
    other.release("shared-thread")
    turn = hub.start("shared-thread", {"messages": [("user", "hi")]})
    assert turn.wait(30)
    assert turn.events[-1]["event"] == "done" and turn.events[-1]["content"] == "hello from this worker"
    assert other.acquire("shared-thread")  # released when the turn ended


def test_a_jorb_whose_worker_died_elsewhere_is_recovered_when_its_lease_ends(pg_env, tmp_path, monkeypatch):
    """A worker on another machine claimed a jorb and died (no renewals): once the lease ends, this worker's
    recovery sweep runs the jorb's step."""
    import time

    from orchestrator.storage.claims import Claims
    from tests.app_helpers import jorb_service

    monkeypatch.setenv("JARVIS_TEST_DECISIONS", str(tmp_path / "decisions.jsonl"))
    svc = jorb_service(pg_env.settings, llm=object())
    row = svc.store.create(name="Orphan", plan="Ask Alice", policy="heuristic:tests.helpers.jorb_worker:ask_then_finish")
    short = pg_env.settings.model_copy(update={"storage": pg_env.settings.storage.model_copy(update={"claim_lease_s": 0.5})})
    assert Claims(short, worker="other-host:4242:dead00").acquire(row.thread_id)
    assert svc.recover() == []  # its lease still runs: that worker may be alive
    time.sleep(0.6)
    assert svc.recover() == [row.id]
    assert svc.store.get(row.id).status == "awaiting_reply"
