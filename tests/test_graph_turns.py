"""The chat graph end to end through the scripted model server over HTTP ([1])."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from orchestrator.llm.client import ModelEndpointError
from tests.conftest import answer, tool_call


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def test_turn_calls_fs_list_dir_and_answers_from_its_result(jarvis_env):
    (jarvis_env.root / "notes.txt").write_text("hello")
    jarvis_env.server.push(tool_call("fs_list_dir", path=str(jarvis_env.root)), answer("You have notes.txt."))
    out = jarvis_env.graph().invoke({"messages": [("user", "what is in my folder?")]}, _cfg("t1"))
    kinds = [m.type for m in out["messages"]]
    assert kinds == ["human", "ai", "tool", "ai"]
    assert "notes.txt" in out["messages"][2].content
    assert out["messages"][-1].content == "You have notes.txt."
    # The model's second request carried the tool result and the tool schemas were bound.
    first, second = jarvis_env.server.requests
    bound = {t["function"]["name"] for t in first["tools"]}
    offered = {t.name for t in jarvis_env.app().runtime.catalog.offered()} | {"create_new_tool"}
    assert "fs_list_dir" in bound and bound <= offered
    assert any(m["role"] == "tool" and "notes.txt" in m["content"] for m in second["messages"])


def test_second_process_continues_the_thread(jarvis_env):
    jarvis_env.server.push(answer("Nice to meet you, Ada."), answer("Your name is Ada."))
    first = jarvis_env.cli("chat", "--thread", "shared", "my name is Ada")
    assert first.returncode == 0, first.stderr
    assert "Nice to meet you, Ada." in first.stdout
    second = jarvis_env.cli("chat", "--thread", "shared", "what is my name?")
    assert second.returncode == 0, second.stderr
    assert "Your name is Ada." in second.stdout
    # The second process (a new interpreter) sent the first turn's messages from the checkpoint on disk.
    sent = [m.get("content") for m in jarvis_env.server.requests[1]["messages"]]
    assert "my name is Ada" in sent and "Nice to meet you, Ada." in sent
    shown = jarvis_env.cli_here("threads", "show", "shared", "--json")
    assert shown.returncode == 0 and "what is my name?" in shown.stdout
    listed = jarvis_env.cli_here_json("threads", "list", "--json")
    assert [t["thread_id"] for t in listed] == ["shared"] and listed[0]["title"] == "my name is Ada"


def test_model_endpoint_down_gives_one_clear_sentence_and_keeps_the_thread(jarvis_env):
    # with the fallback off, nothing stands in: `jarvis chat` says so before any turn, with no try to wait through
    jarvis_env.write_config(models={"primary": {"base_url": "http://127.0.0.1:9/v1", "max_retries": 2},
                                    "fallback": False})
    proc = jarvis_env.cli("chat", "--thread", "down", "hello?")
    assert proc.returncode == 1
    assert "Cannot reach the model endpoint at http://127.0.0.1:9/v1" in proc.stderr
    assert "models.primary.base_url" in proc.stderr
    assert "Traceback" not in proc.stderr and "waiting for the model" not in proc.stderr

    graph = jarvis_env.graph()
    with pytest.raises(ModelEndpointError):
        graph.invoke({"messages": [("user", "hello again?")]}, _cfg("down"))
    # The thread is intact: both user messages are in the checkpoint, and once the model is back the turn goes on.
    jarvis_env.write_config()
    jarvis_env.server.push(answer("I am back."))
    graph = jarvis_env.graph()
    out = graph.invoke(None, _cfg("down"))
    texts = [m.content for m in out["messages"]]
    assert texts[:2] == ["hello?", "hello again?"] and texts[-1] == "I am back."


def test_malformed_arguments_and_unknown_tool_go_back_to_the_planner(jarvis_env):
    jarvis_env.server.push(
        {"tool_calls": [{"name": "fs_list_dir", "arguments": '{"path": "/tmp'},
                        {"name": "teleport", "arguments": {"to": "mars"}}]},
        answer("Sorry, let me fix that."),
    )
    out = jarvis_env.graph().invoke({"messages": [("user", "do things")]}, _cfg("bad"))
    tool_msgs = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == 2 and all(m.status == "error" for m in tool_msgs)
    by_id = {m.tool_call_id: m.content for m in tool_msgs}
    ai = out["messages"][1]
    assert isinstance(ai, AIMessage)
    assert len(ai.invalid_tool_calls) == 1 and len(ai.tool_calls) == 1
    assert "not valid JSON" in by_id[ai.invalid_tool_calls[0]["id"]]
    assert "no tool named 'teleport'" in by_id[ai.tool_calls[0]["id"]]
    assert out["messages"][-1].content == "Sorry, let me fix that."
    # The model saw both errors, each answering its own call id.
    last_request = jarvis_env.server.requests[-1]
    answered = {m["tool_call_id"] for m in last_request["messages"] if m["role"] == "tool"}
    assert answered == set(by_id)


def test_step_limit_ends_a_looping_turn_with_a_message(jarvis_env):
    jarvis_env.write_config(planner={"max_steps": 3})
    jarvis_env.server.add_rule(lambda req: True, tool_call("time_now"))
    out = jarvis_env.graph().invoke({"messages": [("user", "loop forever")]}, _cfg("loop"))
    assert "stopped this request after 3 steps" in out["messages"][-1].content
    assert len(jarvis_env.server.requests) == 3


def test_async_invoke_with_the_async_checkpointer(jarvis_env):
    from orchestrator.app import build_graph
    from orchestrator.storage.engines import make_async_checkpointer

    (jarvis_env.root / "a.txt").write_text("x")
    jarvis_env.server.push(tool_call("fs_list_dir", path=str(jarvis_env.root)), answer("one file"))

    async def run() -> dict:
        saver = await make_async_checkpointer(jarvis_env.settings)
        try:
            graph = build_graph(jarvis_env.settings, checkpointer=saver)
            return await graph.ainvoke({"messages": [("user", "list")]}, _cfg("async"))
        finally:
            await saver.conn.close()

    out = asyncio.run(run())
    assert out["messages"][-1].content == "one file"
    assert "a.txt" in out["messages"][2].content


def test_attachments_in_the_message_reach_the_planner(jarvis_env):
    pdf = jarvis_env.root / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    jarvis_env.server.push(answer("ok"))
    jarvis_env.graph().invoke(
        {"messages": [("user", f"summarize {pdf} and https://youtu.be/dQw4w9WgXcQ please")]}, _cfg("att"))
    # after the user's message (chat/turn_context.py), not in the system prompt, whose prefix then holds
    system, latest = (m["content"] for m in jarvis_env.server.requests[0]["messages"])
    assert f"pdf: {pdf}" in latest and "youtube: https://youtu.be/dQw4w9WgXcQ" in latest and "pdf:" not in system


def test_runs_are_recorded_with_nodes_tools_and_tokens(jarvis_env):
    jarvis_env.server.push(tool_call("time_now"), answer("It is now."))
    jarvis_env.graph().invoke({"messages": [("user", "time?")]}, _cfg("tele"))
    runs = jarvis_env.cli_here_json("runs", "list", "--json")
    assert len(runs) == 1
    run = runs[0]
    assert run["thread_id"] == "tele" and run["status"] == "ok"
    assert run["model_calls"] == 2 and run["tool_calls"] == 1 and run["prompt_tokens"] > 0
    shown = jarvis_env.cli_here_json("runs", "show", run["id"][:8], "--json")
    names = [(e["kind"], e["name"]) for e in shown["events"]]
    assert ("node", "planner") in names and ("tool", "time_now") in names and ("node", "respond") in names
    assert sum(1 for k, _ in names if k == "model") == 2


def test_a_run_whose_tool_call_failed_is_not_listed_as_ok(jarvis_env):
    jarvis_env.server.push(tool_call("fs_read_text", path=str(jarvis_env.root / "missing.txt")), answer("No such file."))
    jarvis_env.graph().invoke({"messages": [("user", "read missing.txt")]}, _cfg("failed-call"))
    line = next(x for x in jarvis_env.cli_here("runs", "list").stdout.splitlines() if "thread failed-call" in x)
    assert "finished, 1 tool call failed" in line and " ok " not in line and "tools 1 (1 errors)" in line


def test_a_nameless_jorb_is_refused_before_the_user_is_asked(jarvis_env):
    """The built-in 135M model answered "hello, who are you?" with jorb_create(name="", plan="book"): the user was
    asked to confirm "Start the long-running task '': book". Its arguments are refused first; the model is told."""
    nameless = {"tool_calls": [{"name": "jorb_create", "arguments": {"name": "", "plan": "book"}}]}
    jarvis_env.server.push(nameless, answer("I am Jarvis, your assistant."))
    out = jarvis_env.graph().invoke({"messages": [("user", "hello, who are you?")]}, _cfg("hello"))
    assert "__interrupt__" not in out
    assert out["messages"][-1].content == "I am Jarvis, your assistant."
    refused = out["messages"][2]
    assert refused.type == "tool" and "name" in refused.content and "Error" in refused.content, refused.content


def test_tool_writing_can_be_turned_off(jarvis_env):
    """jarb.enabled: false (small models): the planner is neither offered create_new_tool nor told about it."""
    jarvis_env.write_config(jarb={"enabled": False})
    jarvis_env.server.push(answer("Hello."))
    jarvis_env.graph().invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "nojarb"}})
    (request,) = jarvis_env.server.requests
    assert "create_new_tool" not in {t["function"]["name"] for t in request["tools"]}
    assert "create_new_tool" not in request["messages"][0]["content"]


def test_a_server_that_reports_no_usage_shows_tokens_as_unknown_not_zero(jarvis_env):
    """[17] finding 8: llama-cpp-python's server (and others) ignore the request for usage in a stream; `jarvis runs`
    showed 0/0 for every turn. A call the server did not count is said so; counted ones stay figures."""
    jarvis_env.server.push({"content": "Uncounted.", "no_usage": True})
    jarvis_env.graph().invoke({"messages": [("user", "hi")]}, _cfg("uncounted"))
    jarvis_env.server.push(tool_call("time_now"), {"content": "Half counted.", "no_usage": True})
    jarvis_env.graph().invoke({"messages": [("user", "time?")]}, _cfg("half"))
    listed = jarvis_env.cli_here("runs", "list").stdout
    uncounted = next(line for line in listed.splitlines() if "thread uncounted" in line)
    half = next(line for line in listed.splitlines() if "thread half" in line)
    assert "tokens unknown (the model server reported none)" in uncounted and "0/0" not in uncounted
    assert "(+1 model call(s) the server did not count)" in half
    runs = {r["thread_id"]: r for r in jarvis_env.cli_here_json("runs", "list", "--json")}
    assert (runs["uncounted"]["unreported_calls"], runs["half"]["unreported_calls"]) == (1, 1)
    assert runs["half"]["prompt_tokens"] > 0


def test_a_tool_runs_only_once_the_step_that_called_it_is_on_disk(jarvis_env):
    # LangGraph writes a step's checkpoint in the background by default, while the next step already runs. A tool
    # with a side effect could then start before the model's call that asked for it was saved; after a crash the
    # turn would plan again, make a new call (new ids, unknown to the ledger) and do the effect twice. The chat
    # graph saves each step before the next one starts (LangGraph's "sync" durability), like the jorbs.
    import time

    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver

    from integrations.base import set_tool_meta

    from orchestrator.storage.engines import make_checkpointer

    saver = make_checkpointer(jarvis_env.settings)

    class SlowSaver(SqliteSaver):  # a busy disk: each checkpoint takes a while to land
        def put(self, config, checkpoint, metadata, new_versions):
            time.sleep(0.3)
            return super().put(config, checkpoint, metadata, new_versions)

    slow = SlowSaver(saver.conn, serde=saver.serde)
    seen: list[list[str]] = []

    @tool
    def stamp_note() -> str:
        """Stamp the note."""
        saved = slow.get_tuple(_cfg("durable"))
        seen.append([m.type for m in saved.checkpoint["channel_values"].get("messages", [])] if saved else [])
        return "stamped"

    jarvis_env.server.push(tool_call("stamp_note"), answer("Stamped."))
    out = jarvis_env.graph(checkpointer=slow, tools=[set_tool_meta(stamp_note)]).invoke({"messages": [("user", "stamp it")]},
                                                                          _cfg("durable"))
    assert out["messages"][-1].content == "Stamped."
    assert seen == [["human", "ai"]]  # the model's call was saved before the tool ran


def test_a_server_that_answers_without_the_model_named_is_reported_as_such_not_replaced(jarvis_env):
    """A wrong model name is not a server that does not answer: the CLI names what the server lists, and does not
    switch to another model (the fallback is for nothing answering)."""
    jarvis_env.server.brain.model_list = ["qwen2.5:7b", "llama3.2:latest"]
    jarvis_env.server.brain.model_fields = {"owned_by": "library"}  # Ollama's listing: only the names it lists
    jarvis_env.server.push(answer("This server takes any name."))
    proc = jarvis_env.cli("chat", "hello?")
    assert "answers, but has no model named 'scripted-model'" in proc.stderr and "qwen2.5:7b" in proc.stderr
    assert "using the built-in" not in proc.stderr and "nothing answers" not in proc.stderr
    # the turn still goes to that server (some take any name): nothing switched behind the user's back
    assert jarvis_env.server.requests and jarvis_env.server.requests[-1]["model"] == "scripted-model"
    assert proc.returncode == 0 and "This server takes any name." in proc.stdout
