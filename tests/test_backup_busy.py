"""Backups ([34]) taken while Jarvis is busy: a chat turn held mid-answer, a jorb's script running, reminders
firing. Each database is copied from a snapshot of one instant (sqlite_parts.one_instant), so what a restore gives
back is what a power cut at that instant would have left: a reminder marked fired has its message in its thread,
and the jorb whose script was running carries on without sending twice."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

from orchestrator.backup.create import create_backup
from orchestrator.backup.restore import restore_backup
from tests.backup_helpers import other_machine

REMINDERS = 120


def step(**fields) -> dict:
    return {"content": json.dumps(fields)}


def _wait(done, what: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not done():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_backup_of_a_busy_jarvis_restores_one_instant(jarvis_env, tmp_path):
    from orchestrator.app import App
    from orchestrator.chat.turns import thread_config
    from orchestrator.reminders import ReminderRequest, ReminderStore
    from orchestrator.reminders.models import SENT, utcnow

    # The script leaves a marker on the host (to say it runs), which the sandbox forbids: resource limits only.
    jarvis_env.write_config(sandbox={"required": False, "backend": "none"})
    srv, root = jarvis_env.server, jarvis_env.root
    started, release = root / "script-started", root / "script-release"
    script = (f"jarvis.messages.send('local', 'carol', 'one')\nopen({str(started)!r}, 'a').write('x')\n"
              f"import os, time\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.05)\n'finished'")
    reached, let_go = threading.Event(), threading.Event()
    srv.push(step(reasoning="send and wait", script=script),
             {"content": "Once upon a time there was a long answer.", "hold": (reached, let_go)},
             step(reasoning="done", done=True, result="ok"))
    app = App(jarvis_env.settings)
    store = ReminderStore(jarvis_env.settings)
    ids = [store.create(ReminderRequest(title=f"r{n}", when=utcnow().isoformat(), thread_id="notes")).id
           for n in range(REMINDERS)]

    jorb_done: list = []
    jorb = threading.Thread(target=lambda: jorb_done.append(
        app.jorbs.create("Carol", "Tell Carol, then wait", autonomy={"message_send": "auto"})))
    jorb.start()
    _wait(started.exists, "the jorb's script to run")
    turn = threading.Thread(target=lambda: app.graph.invoke({"messages": [("user", "tell me a story")]},
                                                             thread_config("story")))
    turn.start()
    assert reached.wait(60), "the turn never reached its answer"

    sched = app.scheduler(store=store)
    def fire_all() -> None:
        deadline = time.time() + 120
        while len(store.list(status=SENT)) < REMINDERS and time.time() < deadline:
            sched.tick(utcnow())
            sched.wait_idle(60)

    firing = threading.Thread(target=fire_all)
    backups = []
    try:
        firing.start()
        while firing.is_alive() or not backups:
            backups.append(create_backup(jarvis_env.settings, tmp_path / "backups").path)
    finally:
        firing.join()
        release.touch()
        let_go.set()
        turn.join(60)
        jorb.join(120)
    assert len({r.id for r in store.list(status=SENT)}) == REMINDERS
    assert jorb_done and jorb_done[0].row.status == "done"

    # Every backup: each reminder marked fired has its message in the thread (the two live in two databases).
    for n, backup in enumerate(backups):
        there = other_machine(jarvis_env, tmp_path / f"m{n}")
        restore_backup(there.settings, backup)
        sent = {r.id for r in ReminderStore(there.settings).list(status=SENT)}
        values = App(there.settings).graph.get_state(thread_config("notes")).values
        posted = {m.id for m in (values or {}).get("messages", [])}
        missing = sorted(i for i in sent if f"reminder-{i}" not in posted)
        assert not missing, f"backup {n + 1} of {len(backups)}: {len(missing)} reminders fired with no message"

    # The first backup, taken with the turn held and the script running, restored and compared.
    new = other_machine(jarvis_env, tmp_path / "new")
    new.cli("backup", "restore", str(backups[0]), check=True)
    app2 = App(new.settings)
    story = app2.graph.get_state(thread_config("story")).values["messages"]
    assert [m.type for m in story] == ["human"] and story[0].content == "tell me a story"
    (row,) = app2.jorbs.list()
    assert row.status == "running"
    srv.push(step(reasoning="done", done=True, result="ok"))
    assert app2.jorbs.recover() == [row.id]
    assert app2.jorbs.view(row.id).row.status == "done"
    # The script ran again there; the ledger in the same instant's copy answered its send without sending again.
    assert [m.text for m in app2.jorbs.store.messages(jorb_id=row.id, direction="out")] == ["one"]
    # Reminders taken for delivery when the copy was made are retried once their lease ends, as after a power cut
    # (their message, if it was posted, is replaced, not repeated); the others fire at once.
    new.write_config(sandbox={"required": False, "backend": "none"}, scheduler={"missed_grace_s": 3600})
    app2 = App(new.settings)
    sched2 = app2.scheduler(store=ReminderStore(new.settings))
    after_leases = utcnow() + timedelta(seconds=new.settings.scheduler.lease_s + 1)
    while sched2.tick(after_leases).claimed:
        assert sched2.wait_idle(60)
    assert len(ReminderStore(new.settings).list(status=SENT)) == REMINDERS
    messages = app2.graph.get_state(thread_config("notes")).values["messages"]
    posted = [m.id for m in messages if (m.id or "").startswith("reminder-")]
    assert sorted(posted) == sorted(f"reminder-{i}" for i in ids)  # each once
