"""Stop ([19] point 3): the user stops a running turn; the model's answer ends at its next token, nothing new starts,
and the thread is left as a finished turn the next message can follow."""

from __future__ import annotations

import threading
import time

from langchain_core.messages import AIMessage, ToolMessage

from orchestrator.chat.turns import STOPPED_TEXT, _close_stopped_turn, thread_config
from tests.conftest import answer, tool_call
from tests.test_ui_browser import browser, open_ui, send  # noqa: F401 - fixtures
from tests.ui_server import ui_server  # noqa: F401 - fixture

SLOW = " ".join(f"word{i}" for i in range(400))  # 400 tokens at 0.05 s: 20 s if nobody stops it


def test_stop_ends_a_slow_answer_and_the_thread_goes_on(ui_server):
    srv = ui_server.env.server
    srv.push({"content": SLOW, "token_delay_s": 0.05})
    events: list = []
    worker = threading.Thread(target=lambda: ui_server.stream("/api/threads/web-stop/messages",
                                                              {"text": "tell me everything"}, into=events))
    worker.start()
    with ui_server.client() as c:
        # stopped once some tokens have reached the user (a fixed wait raced a loaded machine: stopped before the
        # model's first token, the turn rightly streamed nothing)
        deadline = time.monotonic() + 30
        while sum(e["event"] == "token" for e in list(events)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.post("/api/threads/web-stop/stop").json() == {"stopping": True}
    worker.join(timeout=60)
    assert not worker.is_alive()
    streamed = "".join(e.get("text", "") for e in events if e["event"] == "token")
    assert 0 < len(streamed.split()) < 400  # the answer was cut where the user stopped it
    kinds = [e["event"] for e in events if e["event"] not in ("start", "end")]  # the SSE frame's own events
    assert "token" in kinds and kinds[-1] == "stopped" and "done" not in kinds, kinds
    # what was said so far is kept, with the note
    kept = next(e for e in events if e["event"] == "stopped")["content"]
    assert kept.startswith(streamed.rstrip()) and kept.endswith(f"[{STOPPED_TEXT}]"), kept[-200:]
    with ui_server.client() as c:
        shown = c.get("/api/threads/web-stop").json()
        assert shown["messages"][-1]["content"] == kept and not shown.get("running")
        assert c.post("/api/threads/web-stop/stop").status_code == 409  # nothing runs now
    srv.push(answer("Short answer."))
    events = ui_server.stream("/api/threads/web-stop/messages", {"text": "in short?"})
    assert next(e for e in events if e["event"] == "done")["content"] == "Short answer."


def test_a_stopped_turn_answers_the_calls_it_did_not_run(jarvis_env):
    # Stopped between the model's call and the tool: the next request must not carry a tool call without its
    # result (OpenAI-style servers refuse that), so each gets "not run".
    graph = jarvis_env.graph()
    config = thread_config("dangling")
    graph.update_state(config, {"messages": [("user", "list it"), AIMessage(content="", tool_calls=[
        {"name": "fs_list_dir", "args": {"path": "."}, "id": "c1"}, {"name": "time_now", "args": {}, "id": "c2"}])]},
        as_node="planner")
    _close_stopped_turn(graph, config)
    messages = graph.get_state(config).values["messages"]
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    assert [(t.tool_call_id, t.status) for t in tools] == [("c1", "error"), ("c2", "error")]
    assert "stopped" in tools[0].content and messages[-1].content == STOPPED_TEXT
    assert not graph.get_state(config).next  # a finished turn
    jarvis_env.server.push(answer("Fine."))
    out = graph.invoke({"messages": [("user", "again")]}, config)
    assert out["messages"][-1].content == "Fine."
    sent = jarvis_env.server.requests[-1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ["c1", "c2"]


def test_nothing_new_starts_after_stop(ui_server):
    # Stopped while a tool runs: the tool finishes, the model is not called again.
    srv = ui_server.env.server
    (ui_server.env.root / "a.txt").write_text("x")
    srv.push(tool_call("fs_list_dir", path=str(ui_server.env.root)), answer("never asked"))
    hub = ui_server.app.state.jarvis.turns
    turn = hub.start("web-stop-tool", {"messages": [("user", "list")]})
    turn.stop.set()  # before the first model call even starts
    assert turn.wait(30)
    assert [e["event"] for e in turn.events][-1] == "stopped"
    assert len(srv.requests) == 0  # no model call started


def test_the_stop_button_and_esc(open_ui):
    page, server = open_ui()
    server.env.server.push({"content": SLOW, "token_delay_s": 0.05}, {"content": SLOW, "token_delay_s": 0.05})
    send(page, "tell me everything")
    page.locator(".msg.assistant.streaming").wait_for()
    page.get_by_role("button", name="Stop").click()
    page.locator(".msg.assistant.stopped", has_text=STOPPED_TEXT).wait_for()
    assert page.locator(".msg.assistant.stopped").inner_text().startswith("word0")  # what was said so far stays
    assert page.locator(".working").count() == 0
    send(page, "and again")
    page.locator(".msg.assistant.streaming").wait_for()
    page.keyboard.press("Escape")
    page.locator(".msg.assistant.stopped").nth(1).wait_for()
    page.reload()
    page.locator(".msg.assistant", has_text=STOPPED_TEXT).nth(1).wait_for()  # the history says so too


def test_ctrl_c_in_jarvis_chat_stops_the_turn_and_keeps_the_thread(jarvis_env):
    import signal


    jarvis_env.server.push({"content": SLOW, "token_delay_s": 0.05})
    proc = jarvis_env.popen("chat", "--thread", "cli-stop", "tell me everything", text=True)
    first = proc.stdout.read(20)  # tokens are arriving
    assert first.startswith("word0"), first
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert STOPPED_TEXT in err and "Traceback" not in err
    assert "TurnStopped" not in err and "callback" not in err, err  # a Stop asked for is not logged as an error
    assert len((first + out).split()) < 400
    shown = jarvis_env.cli_json("threads", "show", "cli-stop", "--json")
    assert shown["messages"][-1]["content"].startswith("word0") and STOPPED_TEXT in shown["messages"][-1]["content"]
