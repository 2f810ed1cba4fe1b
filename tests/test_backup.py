"""Backups ([34]): one file made while Jarvis works, restored on another machine where what waited still waits."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import timedelta

from orchestrator.tools.ledger import EffectsLedger
from orchestrator.channels.inbound import InboundMessage
from tests.backup_helpers import other_machine


def step(**fields) -> dict:
    return {"content": json.dumps(fields)}


def test_a_backup_made_while_jarvis_writes_restores_elsewhere_with_everything_still_waiting(jarvis_env, tmp_path):
    """A pending confirmation, a jorb waiting for a reply, a reminder not yet fired and the ledger's record of a
    message sent: after `backup create` (while reminders are being written) and `backup restore` on another data
    folder, each goes on there, and the message is not sent twice."""
    from orchestrator.app import App
    from orchestrator.reminders import ReminderRequest, ReminderStore
    from orchestrator.reminders.models import utcnow

    srv = jarvis_env.server
    target = jarvis_env.root / "report.txt"
    script = (f"jarvis.messages.send('local', 'alice@example.com', 'starting')\n"
              f"jarvis.fs.write_text({str(target)!r}, 'the report')\n'written'")
    srv.push(step(reasoning="write", script=script),
             step(reasoning="ask", script="jarvis.messages.send('local', 'bob', 'free tonight?')", await_reply=True),
             step(reasoning="wait until reminded", await_reply=True))
    settings = jarvis_env.settings
    jorbs = App(settings).jorbs
    confirming = jorbs.create("Report", "Tell Alice, write the report", autonomy={"message_send": "auto"})
    assert confirming.row.status == "paused" and not target.exists()
    waiting = jorbs.create("Ask Bob", "Ask Bob", autonomy={"message_send": "auto"})
    assert waiting.row.status == "awaiting_reply"
    reminded = jorbs.create("Check-in", "Wait for the check-in reminder, then finish")
    store = ReminderStore(settings)
    store.create(ReminderRequest(title="time to check in", when=utcnow().isoformat(), jorb_id=reminded.row.id))

    # Jarvis keeps writing while the backup runs: every copy is a consistent snapshot all the same.
    stop, written = threading.Event(), []

    def keep_writing() -> None:
        later = (utcnow() + timedelta(days=30)).isoformat()
        while not stop.is_set():
            written.append(store.create(ReminderRequest(title="someday", when=later, thread_id="someday")))

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        made = jarvis_env.cli("backup", "create", "--to", str(tmp_path / "backups"), "--verify", check=True)
    finally:
        stop.set()
        writer.join()
    assert written, "nothing was written while the backup ran"
    assert "backup written:" in made.stdout and "verified:" in made.stdout, made.stdout
    (backup,) = (tmp_path / "backups").glob("*.jarvis-backup")

    new = other_machine(jarvis_env, tmp_path / "new")
    restored = new.cli("backup", "restore", str(backup), check=True)
    assert f"into {new.data}" in restored.stdout
    db = sqlite3.connect(new.data / "jarvis.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()

    srv.push(step(reasoning="done", done=True, result="ok"),
             step(reasoning="Bob answered", done=True, result="Bob is free"),
             step(reasoning="reminded, done", done=True, result="checked in"))
    app = App(new.settings)
    there = app.jorbs
    (pending,) = there.view(confirming.row.id).pending
    assert pending["tool"] == "fs_write_text"
    done = there.approve(confirming.row.id)
    assert done.row.status == "done" and target.read_text() == "the report"
    # The script ran again on the new machine; the ledger restored with it answered the send without sending.
    assert [m.text for m in there.store.messages(jorb_id=confirming.row.id, direction="out")] == ["starting"]
    assert EffectsLedger(new.settings).count_for_thread(f"jorb:{confirming.row.id}") == 2

    route = there.inbound(InboundMessage("local", "bob", "yes, at 8"))
    assert route.jorb_id == waiting.row.id
    there.wait_background()
    assert there.view(waiting.row.id).row.result == "Bob is free"

    sched = app.scheduler(store=ReminderStore(new.settings))
    sched.tick(utcnow())
    assert sched.wait_idle(30)
    there.wait_background()
    assert there.view(reminded.row.id).row.result == "checked in"
