"""One conformance suite for the storage backends ([15] item 7): SQLite and PostgreSQL run the same tests, as
LangGraph does for its checkpointers. Each test gets `settings` for one backend (a fresh SQLite folder, or a
fresh database on the session's real PostgreSQL server, tests/pg_server.py) and checks a store's contract:
the effects ledger, the questions asked, jorbs and their messages, threads and their archive, reminders, the
JARB tool registry and the checkpointer. A behaviour that differs between the backends fails on one of them.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from orchestrator.storage import engines as storage
from orchestrator.core.config import settings_from_dict


@pytest.fixture(params=["sqlite", "postgres"])
def settings(request, tmp_path):
    data: dict = {"storage": {"data_dir": str(tmp_path / "data")}}
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        data["storage"]["url"] = server.new_database()
    yield settings_from_dict(data, tmp_path)
    storage.dispose_all()


def test_the_ledger_records_an_effect_once_and_replays_it(settings):
    from orchestrator.tools.ledger import COMPLETED, STARTED, EffectsLedger, call_fingerprint

    ledger = EffectsLedger(settings)
    made = call_fingerprint("fs_write_text", {"path": "/x", "content": "é"})
    assert ledger.begin("k1", "t1", "fs_write_text", {"path": "/x", "content": "é"}, ["fs_write"], requested=made)
    assert not ledger.begin("k1", "t1", "fs_write_text", {"path": "/x", "content": "é"}, ["fs_write"])  # once
    entry = ledger.get("k1")
    assert entry.status == STARTED and entry.args == {"path": "/x", "content": "é"} and entry.requested == made
    ledger.complete("k1", "Wrote 2 bytes", ok=True)
    entry = ledger.get("k1")
    assert entry.status == COMPLETED and entry.result_text == "Wrote 2 bytes" and entry.result_ok
    assert ledger.count_for_thread("t1") == 1 and ledger.get("nope") is None


def test_questions_asked_are_kept_in_order_and_forgotten(settings):
    from orchestrator.tools.ledger import EffectsLedger

    ledger = EffectsLedger(settings)
    ledger.record_asked("k", 0, "a" * 64, "write notes.txt")
    ledger.record_asked("k", 1, "b" * 64, "write .bashrc")
    ledger.record_asked("k", 1, "c" * 64, "ignored: (key, seq) is recorded once")
    assert [(a.fingerprint[0], a.summary) for a in ledger.asked("k")] == [("a", "write notes.txt"),
                                                                          ("b", "write .bashrc")]
    ledger.forget_asked("k")
    assert ledger.asked("k") == []


def test_jorbs_their_contacts_and_messages(settings):
    from orchestrator.jorbs.store import JorbStore

    store = JorbStore(settings)
    row = store.create(name="Paris hotel", plan="ask Magic", contacts=["@MagicApp"])
    assert store.get(row.id).name == "Paris hotel"
    store.update(row.id, status="awaiting_reply", waiting_party="@magicapp")
    assert [r.id for r in store.jorbs_with_contact("@magicapp")] == [row.id]
    out = store.log_message(direction="out", channel="local", party="@magicapp", text="Hotels?", status="sent",
                            jorb_id=row.id, thread_key="th-1")
    assert store.jorb_for_thread("local", "th-1").id == row.id
    store.log_message(direction="in", channel="local", party="@magicapp", text="Le Marais 175 €", status="pending",
                      jorb_id=row.id)
    assert store.has_pending(row.id) and row.id in store.waiting_with_pending()
    (taken,) = store.take_pending(row.id)
    assert taken.text == "Le Marais 175 €" and not store.has_pending(row.id)
    assert store.message(out.id).text == "Hotels?"


def test_threads_and_their_archive(settings):
    from orchestrator.storage.threads import ThreadIndex

    threads = ThreadIndex(settings)
    threads.touch("cli-1", title="Budget ✓", status="idle")
    threads.touch("cli-2", title="Other", status="waiting")
    assert threads.get("cli-1").title == "Budget ✓"
    assert {t.thread_id for t in threads.list(statuses=("waiting",))} == {"cli-2"}
    # a later touch moves updated_at, keeps the status it does not name and the title once there is one
    before = threads.get("cli-2")
    threads.touch("cli-2", title="A later request")
    after = threads.get("cli-2")
    assert (after.title, after.status, after.created_at) == ("Other", "waiting", before.created_at)
    assert after.updated_at >= before.updated_at
    threads.touch("cli-3", status="running")  # a row made without a title takes the first one given
    threads.touch("cli-3", title="first words", status="idle")
    assert (threads.get("cli-3").title, threads.get("cli-3").status) == ("first words", "idle")
    threads.archive("cli-1", [HumanMessage("hello", id="m1"), AIMessage("hi there", id="m2")])
    assert [m.content for m in threads.archived("cli-1")] == ["hello", "hi there"]
    threads.delete("cli-1")
    assert threads.get("cli-1") is None and threads.archived("cli-1") == []


def test_a_thread_deleted_or_renamed_while_its_turn_s_writes_are_queued(settings):
    # A turn's thread bookkeeping (touch_later: its title and status) is queued on the writer thread. A delete
    # that came before the queue drained was undone by the queued touch, and a rename of a new thread said
    # "no such thread". Here the writer is held until both calls are under way.
    import threading

    from orchestrator.storage import writer
    from orchestrator.storage.threads import ThreadIndex

    threads = ThreadIndex(settings)
    threads.touch("gone", title="Old")
    go = threading.Event()
    writer.submit(lambda: go.wait(30))
    threads.touch_later("gone", title="Old", status="running")
    threads.touch_later("new", title="first words", status="running")
    releaser = threading.Timer(0.3, go.set)  # lets the writer go on while delete and rename wait for it
    releaser.start()
    try:
        threads.delete("gone")
        renamed = threads.rename("new", "My title")
    finally:
        go.set()
        releaser.cancel()
    assert renamed is not None and renamed.title == "My title"
    assert threads.get("gone") is None and threads.get("new").title == "My title"


def test_reminders_are_claimed_once_and_settled(settings):
    from orchestrator.reminders.spec import ReminderRequest
    from orchestrator.reminders.store import ReminderStore

    store = ReminderStore(settings)
    soon = datetime.now(timezone.utc) + timedelta(seconds=2)
    r = store.create(ReminderRequest(title="call mum", when=soon.isoformat(), thread_id="cli-1"), naive="utc")
    assert not store.any_due(soon - timedelta(seconds=1))
    now = soon + timedelta(seconds=1)  # the store is asked as of a time: no waiting
    assert store.any_due(now)
    (claimed,) = store.claim_due(now, now + timedelta(seconds=60), limit=10, missed_grace_s=3600)
    assert claimed.id == r.id
    assert store.claim_due(now, now + timedelta(seconds=60), limit=10, missed_grace_s=3600) == []  # leased
    store.mark_sent(claimed, now)
    assert store.get(r.id).status == "sent"


def test_the_tool_registry_versions_and_trust(settings):
    from jarb_core.registry import ToolRegistry

    registry = ToolRegistry(storage.engine_for(settings, storage.TOOL_REGISTRY_DB))
    from jarb_core.registry import RegistryError

    common = dict(path="/tools/wc_v1.py", tests_path="/tools/test_wc_v1.py", source="def wc(): ...",
                  schema={"type": "object"}, side_effects=[], spec={"name": "wc"}, manifest={}, test_report={},
                  trust="confirm", network_approved=False)
    registry.add(name="wc", version=1, **common)
    with pytest.raises(RegistryError):
        registry.add(name="wc", version=1, **common)  # a version is taken once
    registry.add(name="wc", version=2, **{**common, "source": "def wc(): return 2"})
    assert registry.next_version("wc") == 3 and registry.names() == {"wc"}
    assert registry.get("wc").version == 2 and registry.get("wc", 1).source == "def wc(): ..."


def test_the_registry_revision_changes_with_every_write_of_another_registry(settings):
    # revision() reads the table only when SQLite's data_version says another connection committed: every write
    # of another registry (another process's, here another instance's) must still change it, and nothing else.
    from jarb_core.registry import ToolRegistry

    engine = storage.engine_for(settings, storage.TOOL_REGISTRY_DB)
    reader, writer_ = ToolRegistry(engine), ToolRegistry(engine)
    common = dict(path="/tools/wc_v1.py", tests_path="/tools/test_wc_v1.py", source="def wc(): ...",
                  schema={"type": "object"}, side_effects=[], spec={"name": "wc"}, manifest={}, test_report={},
                  trust="confirm", network_approved=False)
    seen = [reader.revision()]
    for write in (lambda: writer_.add(name="wc", version=1, **common),
                  lambda: writer_.add(name="wc", version=2, **common),
                  lambda: writer_.set_status("wc", "disabled", version=2),
                  lambda: writer_.delete_version("wc", 1)):
        assert reader.revision() == seen[-1]  # nothing written: the same
        write()
        seen.append(reader.revision())
        assert seen[-1] != seen[-2], f"a write was not seen: {seen}"


def test_the_checkpointer_keeps_a_thread_across_instances(settings):
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict):
        n: int

    def build():
        g = StateGraph(State)
        g.add_node("inc", lambda s: {"n": s["n"] + 1})
        g.add_edge(START, "inc")
        g.add_edge("inc", END)
        return g.compile(checkpointer=storage.make_checkpointer(settings))

    config = {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:6]}"}}
    assert build().invoke({"n": 1}, config)["n"] == 2
    assert build().get_state(config).values["n"] == 2  # a new checkpointer instance reads it back


def test_a_jorb_status_outside_the_known_ones_is_refused_and_nothing_is_written(settings):
    from orchestrator.jorbs.schema import JorbStatus
    from orchestrator.jorbs.store import JorbStore

    store = JorbStore(settings)
    row = store.create(name="n", plan="p")
    assert row.status == JorbStatus.PLANNING
    with pytest.raises(ValueError, match="'finished' is not a valid JorbStatus"):
        store.update(row.id, status="finished", pause_reason="half-written")
    again = store.get(row.id)
    assert again.status == "planning" and again.pause_reason is None
    store.update(row.id, status=JorbStatus.PAUSED, pause_reason="asks")
    store.update(row.id, steps=2)  # other fields stay
    again = store.get(row.id)
    assert (again.status, again.pause_reason, again.steps) == ("paused", "asks", 2)
    store.update(row.id, pause_reason=None)
    assert store.get(row.id).pause_reason is None


def test_statuses_are_written_as_their_text_and_read_as_their_enum(settings):
    """The status columns take only their enum's members and store the plain text on both backends (psycopg would
    write a Python Enum by its name, 'PENDING', where every query looks for 'pending')."""
    from sqlalchemy import text as sql

    from orchestrator.storage.engines import jarvis_engine
    from orchestrator.storage.threads import ThreadIndex, ThreadStatus

    threads = ThreadIndex(settings)
    threads.touch("t-status", status=ThreadStatus.WAITING)
    with pytest.raises(ValueError, match="'asleep' is not a valid ThreadStatus"):
        threads.touch("t-status", status="asleep")
    with jarvis_engine(settings).connect() as conn:
        stored = conn.execute(sql("SELECT status FROM threads WHERE thread_id = 't-status'")).scalar_one()
    assert stored == "waiting"
    info = threads.get("t-status")
    assert info.status is ThreadStatus.WAITING
    assert [t.thread_id for t in threads.list(statuses=(ThreadStatus.WAITING,))] == ["t-status"]


def test_every_sqlite_connection_gets_the_same_settings(tmp_path):
    """Engines, the checkpointer and pruning open their SQLite files with one list of pragmas (they were set three
    ways: pruning waited for no lock, the async checkpointer had none)."""
    import asyncio

    from orchestrator.core.config import settings_from_dict
    from orchestrator.storage import checkpoints, engines

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}}, tmp_path)

    def pragmas(conn) -> dict[str, int | str]:
        return {name: conn.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "busy_timeout", "synchronous", "foreign_keys")}

    expected = {"journal_mode": "wal", "busy_timeout": 30000, "synchronous": 1, "foreign_keys": 1}
    with engines.jarvis_engine(settings).connect() as conn:
        assert pragmas(conn.connection.dbapi_connection) == expected
    saver = engines.make_checkpointer(settings)
    assert pragmas(saver.conn) == expected
    assert pragmas(checkpoints._connect(settings)) == expected

    async def async_saver() -> dict:
        saver = await engines.make_async_checkpointer(settings)
        cursor = await saver.conn.execute("PRAGMA busy_timeout")
        timeout = (await cursor.fetchone())[0]
        await saver.conn.close()
        return timeout

    assert asyncio.run(async_saver()) == 30000


def test_a_prepared_statement_writes_what_execute_writes(settings):
    """storage/prepared.py runs the after-turn writes on the driver's cursor: the rows read back are those
    `conn.execute` writes (datetimes, NULLs, a literal in the statement, many rows at once), a status outside its
    enum is refused as before, and a statement that needs a Python-side default is refused when prepared."""
    from sqlalchemy import insert, select

    from orchestrator.storage.prepared import Prepared
    from orchestrator.storage.telemetry import RunEventRow, RunRow
    from orchestrator.storage.threads import IDLE, RUNNING, ThreadIndex, ThreadRow

    engine = storage.jarvis_engine(settings)
    when = datetime(2026, 11, 27, 8, 30, 15, 123456, tzinfo=timezone.utc)
    row = dict(id="r1", thread_id=None, graph="chat", started_at=when, duration_ms=1.5, status="ok", error=None,
               prompt_tokens=3, completion_tokens=4, model_calls=1, model_ms=0.25, tool_calls=0, tool_errors=0,
               unreported_calls=None)
    prepared = Prepared(insert(RunRow.__table__), list(row))
    with engine.begin() as conn:
        prepared.run(conn, row)
        conn.execute(insert(RunRow.__table__), {**row, "id": "r2"})
        Prepared(insert(RunEventRow.__table__), ["run_id", "seq", "kind", "name", "offset_ms", "duration_ms", "ok",
                                                 "detail"]).run(conn, [
            {"run_id": "r1", "seq": i, "kind": "node", "name": f"n{i}", "offset_ms": 0.0, "duration_ms": 1.0, "ok": 1,
             "detail": None if i else '{"a": 1}'} for i in range(3)])
    with engine.connect() as conn:
        first, second = (conn.execute(select(RunRow.__table__).where(RunRow.id == i)).one()._asdict() for i in ("r1", "r2"))
        events = conn.execute(select(RunEventRow.name, RunEventRow.detail).where(RunEventRow.run_id == "r1")
                              .order_by(RunEventRow.seq)).all()
    assert {**first, "id": "r2"} == second
    assert first["started_at"].replace(tzinfo=timezone.utc) == when
    assert [tuple(e) for e in events] == [("n0", '{"a": 1}'), ("n1", None), ("n2", None)]

    index = ThreadIndex(settings)
    index.touch("t1", title="First title", status=RUNNING)
    index.touch("t1", title="Another title")  # the literal '' in the upsert: a title is set once; status kept
    info = index.get("t1")
    assert (info.title, info.status) == ("First title", RUNNING)
    index.touch("t1", status=IDLE)
    assert index.get("t1").status == IDLE
    with pytest.raises(Exception, match="'lost' is not a valid ThreadStatus"), engine.begin() as conn:
        index._touch_in(conn, "t1", title=None, status="lost", kind="chat")
    assert index.get("t1").status == IDLE
    with engine.connect() as conn, pytest.raises(ValueError, match="Python-side default: .*created_at"):
        Prepared(insert(ThreadRow.__table__), ["thread_id"]).run(conn, {"thread_id": "t2"})
