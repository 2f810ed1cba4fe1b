"""The background writer (storage/writer.py): writes wait a moment so that a turn ends before they run, run in
order, and flush() runs them at once."""

from __future__ import annotations

import threading

from orchestrator.storage import writer
from orchestrator.storage.threads import IDLE, RUNNING, ThreadIndex


def test_flush_runs_waiting_writes_at_once_in_order(monkeypatch):
    writer.flush()
    monkeypatch.setattr(writer, "LINGER_S", 60.0)  # on its own, the writer would wait a minute
    done: list[int] = []
    for i in range(3):
        writer.submit(lambda i=i: done.append(i))
    finished = threading.Thread(target=writer.flush)
    finished.start()
    finished.join(timeout=20)
    assert not finished.is_alive() and done == [0, 1, 2]


def test_writes_run_without_a_flush():
    writer.flush()
    ran = threading.Event()
    writer.submit(ran.set)
    assert ran.wait(timeout=20)


def test_a_quick_turn_s_two_status_writes_are_one(jarvis_env, monkeypatch):
    index = ThreadIndex(jarvis_env.settings)
    writer.flush()
    monkeypatch.setattr(writer, "LINGER_S", 60.0)
    written: list[dict] = []
    touch = ThreadIndex.touch
    monkeypatch.setattr(ThreadIndex, "touch", lambda self, thread_id, **kw: (written.append(kw), touch(self, thread_id, **kw)))
    index.touch_later("quick", title="hello", status=RUNNING)  # the turn starts...
    index.touch_later("quick", status=IDLE)  # ...and ends before the writer ran
    writer.flush()
    assert written == [{"title": "hello", "status": IDLE, "kind": "chat"}]
    shown = index.get("quick")
    assert shown is not None and shown.title == "hello" and shown.status == IDLE.value
