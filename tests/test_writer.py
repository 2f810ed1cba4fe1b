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
    touch = ThreadIndex._touch_in
    monkeypatch.setattr(ThreadIndex, "_touch_in",
                        lambda self, conn, thread_id, **kw: (written.append(kw), touch(self, conn, thread_id, **kw)))
    index.touch_later("quick", title="hello", status=RUNNING)  # the turn starts...
    index.touch_later("quick", status=IDLE)  # ...and ends before the writer ran
    writer.flush()
    assert written == [{"title": "hello", "status": IDLE.value, "kind": "chat"}]
    shown = index.get("quick")
    assert shown is not None and shown.title == "hello" and shown.status == IDLE.value


def test_a_turn_s_status_and_run_are_one_commit(jarvis_env, monkeypatch):
    from sqlalchemy import event

    from orchestrator.storage.engines import jarvis_engine
    from orchestrator.storage.telemetry import list_runs
    from tests.conftest import answer

    graph = jarvis_env.graph()
    jarvis_env.server.push(answer("Hi."))
    graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "first"}})  # tables made on first use
    writer.flush()
    monkeypatch.setattr(writer, "LINGER_S", 60.0)
    engine = jarvis_engine(jarvis_env.settings)
    commits: list[int] = []

    def committed(conn):
        commits.append(1)

    event.listen(engine, "commit", committed)
    try:
        jarvis_env.server.push(answer("Hello."))
        graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "one-commit"}})
        writer.flush()
    finally:
        event.remove(engine, "commit", committed)
    assert len(commits) == 1, commits
    assert list_runs(jarvis_env.settings, thread_id="one-commit")[0].status == "ok"
    assert ThreadIndex(jarvis_env.settings).get("one-commit").status == IDLE.value


def test_one_bad_write_loses_no_other(jarvis_env, monkeypatch, caplog):
    from sqlalchemy import text

    from orchestrator.storage.engines import jarvis_engine

    engine = jarvis_engine(jarvis_env.settings)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS writer_probe (x INTEGER NOT NULL)"))
    writer.flush()
    monkeypatch.setattr(writer, "LINGER_S", 60.0)
    writer.submit_in(engine, lambda conn: conn.execute(text("INSERT INTO writer_probe VALUES (1)")))
    writer.submit_in(engine, lambda conn: conn.execute(text("INSERT INTO writer_probe VALUES (NULL)")))  # refused
    writer.submit_in(engine, lambda conn: conn.execute(text("INSERT INTO writer_probe VALUES (3)")))
    writer.flush()
    with engine.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT x FROM writer_probe ORDER BY x"))] == [1, 3]
    assert "background write failed" in caplog.text


def test_flush_runs_the_writes_itself_but_never_on_an_event_loop(monkeypatch):
    """Off an event loop flush() runs what is queued on its own thread (waking the writer and being woken again cost
    more than the writes); on a loop's thread it leaves them to the writer, since a write may touch the disk."""
    import asyncio

    writer.flush()
    monkeypatch.setattr(writer, "LINGER_S", 60.0)
    ran_on: list[str] = []
    writer.submit(lambda: ran_on.append(threading.current_thread().name))
    writer.flush()
    assert ran_on == [threading.current_thread().name]

    async def on_a_loop() -> str:
        writer.submit(lambda: ran_on.append(threading.current_thread().name))
        writer.flush()  # blocks this loop until the writer is done, as it always did
        return threading.current_thread().name

    loop_thread = asyncio.run(on_a_loop())
    assert len(ran_on) == 2 and ran_on[1] != loop_thread and ran_on[1] == "jarvis-writer"


def test_a_write_that_flushes_does_not_wait_for_itself(monkeypatch):
    writer.flush()
    monkeypatch.setattr(writer, "LINGER_S", 60.0)
    done: list[str] = []
    writer.submit(lambda: (done.append("outer"), writer.submit(lambda: done.append("inner")), writer.flush()))
    finished = threading.Thread(target=writer.flush)
    finished.start()
    finished.join(timeout=20)
    assert not finished.is_alive() and done == ["outer", "inner"]
