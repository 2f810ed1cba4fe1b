"""A call left `started` by a worker on another machine: "still running there" while that worker's heartbeat
is fresh, "in doubt" (the user decides) once it is older than a lease; and a database from before these
columns existed is upgraded in place."""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import datetime, timedelta, timezone

from sqlalchemy.orm import Session

from orchestrator.tools.executor import CallContext, ToolExecutor
from orchestrator.app import App
from orchestrator.tools.ledger import STARTED, EffectsLedger, LedgerRow
from orchestrator.storage.engines import database_url, dispose_all, jarvis_engine, sqlite_path
from orchestrator.storage.workers import HeartbeatRow, ensure_heartbeat, seems_alive
from tests.reminder_helpers import wait_for

REMOTE = "machine-b:4242:abcdef"


def _remote_call(settings, key: str, target: str, worker: str | None = REMOTE) -> None:
    with Session(jarvis_engine(settings)) as s, s.begin():
        s.add(LedgerRow(key=key, thread_id="shared", tool="fs_write_text",
                        args_json=json.dumps({"path": target, "content": "x"}), side_effects='["fs_write"]',
                        status=STARTED, pid=4242, host="machine-b", worker=worker))


def _heartbeat(settings, age_s: float) -> None:
    with Session(jarvis_engine(settings)) as s, s.begin():
        s.merge(HeartbeatRow(worker=REMOTE, host="machine-b", pid=4242,
                             seen=datetime.now(timezone.utc) - timedelta(seconds=age_s)))


def test_a_call_of_a_remote_worker_is_in_doubt_once_its_heartbeat_is_stale(jarvis_env):
    settings = jarvis_env.settings
    lease = settings.storage.claim_lease_s
    target = str(jarvis_env.root / "remote.txt")
    _remote_call(settings, "k-remote", target)
    ledger = EffectsLedger(settings)
    executor = ToolExecutor(settings, App(settings).catalog)
    ctx = CallContext(thread_id="shared", key="k-remote")
    asked = []

    _heartbeat(settings, age_s=5)  # beating: still running over there
    assert ledger.get("k-remote").owner_alive and ledger.in_doubt("shared") == []
    busy = executor.execute("fs_write_text", {"path": target, "content": "x"}, ctx, confirm=asked.append)
    assert not busy.ok and "already running for this call in another process" in busy.content and asked == []

    _heartbeat(settings, age_s=lease + 60)  # that machine stopped beating: it died mid-call
    assert [e.key for e in ledger.in_doubt("shared")] == ["k-remote"]
    skipped = executor.execute("fs_write_text", {"path": target, "content": "x"}, ctx,
                               confirm=lambda request: asked.append(request) or "skip")
    assert asked[0].kind == "in_doubt" and "may have happened" in asked[0].reason
    assert not skipped.ok and "Skipped fs_write_text" in skipped.content
    assert not (jarvis_env.root / "remote.txt").exists()


def test_without_a_worker_or_heartbeat_a_remote_call_counts_as_running(jarvis_env):
    settings = jarvis_env.settings
    _remote_call(settings, "k-old", str(jarvis_env.root / "old.txt"), worker=None)  # a row from before heartbeats
    _remote_call(settings, "k-silent", str(jarvis_env.root / "silent.txt"), worker="machine-c:1:000000")
    assert EffectsLedger(settings).in_doubt("shared") == []
    assert seems_alive(settings, None) and seems_alive(settings, "machine-c:1:000000")


def test_this_process_beats_when_it_starts_a_side_effect(jarvis_env):
    from orchestrator.storage.claims import worker_id

    settings = jarvis_env.settings
    EffectsLedger(settings).begin("k-local", "t", "fs_write_text", {}, ["fs_write"])
    with Session(jarvis_engine(settings)) as s:
        row = s.get(HeartbeatRow, worker_id())
    assert row is not None and seems_alive(settings, worker_id())
    ensure_heartbeat(settings)  # idempotent


def test_an_older_database_gets_the_new_columns(jarvis_env):
    settings = jarvis_env.settings
    path = sqlite_path(settings, "jarvis")
    path.parent.mkdir(parents=True, exist_ok=True)
    dispose_all()
    with sqlite3.connect(path) as db:  # the ledger as an earlier version made it: no worker column
        db.execute("CREATE TABLE effects_ledger (key VARCHAR(512) PRIMARY KEY, thread_id VARCHAR(256), "
                   "tool VARCHAR(256), args_json TEXT, side_effects TEXT, status VARCHAR(16), result_text TEXT, "
                   "result_ok INTEGER, pid INTEGER, host VARCHAR(256), started_at DATETIME, completed_at DATETIME)")
        db.execute("INSERT INTO effects_ledger VALUES ('k-then', 't', 'fs_write_text', '{}', '[]', 'completed', "
                   "'done', 1, 1, 'h', '2026-01-01 00:00:00', '2026-01-01 00:00:01')")
    ledger = EffectsLedger(settings)
    assert ledger.get("k-then").result_text == "done"
    assert ledger.begin("k-now", "t", "fs_write_text", {}, ["fs_write"])
    with sqlite3.connect(path) as db:
        assert "worker" in [r[1] for r in db.execute("PRAGMA table_info(effects_ledger)")]


def test_the_beat_ends_with_its_database_and_starts_again_when_it_is_opened_again(jarvis_env, caplog):
    # A closed database is not reopened by the beat: it printed "could not record this worker's heartbeat: unable
    # to open database file" at the end of every test run (a test's folder is deleted once its engines are closed).
    from orchestrator.storage import workers
    from orchestrator.storage.claims import worker_id

    jarvis_env.write_config(storage={"claim_lease_s": 0.3})  # a beat every 0.1 s
    settings = jarvis_env.settings
    ensure_heartbeat(settings)
    dispose_all()
    wait_for(lambda: database_url(settings, "jarvis") not in workers._beating)
    assert "heartbeat" not in caplog.text
    ensure_heartbeat(settings)  # opened again: beating again
    with Session(jarvis_engine(settings)) as s:
        first = s.get(HeartbeatRow, worker_id()).seen
    def beat_again() -> bool:
        with Session(jarvis_engine(settings)) as s:
            return s.get(HeartbeatRow, worker_id()).seen > first

    wait_for(beat_again)
    dispose_all()


def test_a_forked_child_is_a_worker_of_its_own():
    """A process forked after its parent named itself has another name: with the parent's, the parent's live pid
    kept a killed child's claims held and nothing recovered its jorb."""
    from orchestrator.storage.claims import worker_id

    parent = worker_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, worker_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 200).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child and child != parent and f":{pid}:" in child
    assert worker_id() == parent  # stable within a process
