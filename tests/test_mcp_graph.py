"""MCP tools in the chat graph: a published server (mcp-server-time from PyPI, pinned in the dev extra) loaded
from a TOML file, a side-effecting tool behind a confirmation, and a crash that becomes an error ToolMessage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from langgraph.types import Command

from tests.conftest import answer, tool_call
from tests.mcp_helpers import shutdown_mcp, write_server

TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


@pytest.fixture(autouse=True)
def _stop_servers():
    yield
    shutdown_mcp()


def _time_toml(mcp_dir: Path) -> None:
    mcp_dir.mkdir(parents=True, exist_ok=True)
    (mcp_dir / "time.toml").write_text(
        f'description = "Time and time zones (mcp-server-time)"\ncommand = "{TIME_SERVER}"\n'
        'args = ["--local-timezone", "UTC"]\ntimeout_s = 10\n', encoding="utf-8")


def test_published_time_server_through_the_graph(jarvis_env):
    _time_toml(jarvis_env.path / "mcp")
    jarvis_env.server.push(tool_call("get_current_time", timezone="Europe/Paris"), answer("It is evening in Paris."))
    graph = jarvis_env.graph()
    out = graph.invoke({"messages": [("user", "what time is it in Paris?")]}, {"configurable": {"thread_id": "mcp-1"}})
    tool_msg = next(m for m in out["messages"] if m.type == "tool")
    assert tool_msg.status == "success"
    data = json.loads(tool_msg.content)
    assert data["timezone"] == "Europe/Paris" and data["datetime"].startswith("20")
    first, second = jarvis_env.server.requests[0], jarvis_env.server.requests[1]
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {"get_current_time", "convert_time"} <= offered
    schema = next(t["function"] for t in first["tools"] if t["function"]["name"] == "get_current_time")
    assert "timezone" in schema["parameters"]["properties"]
    assert any(m["role"] == "tool" and "Europe/Paris" in m["content"] for m in second["messages"])
    assert out["messages"][-1].content == "It is evening in Paris."


def test_side_effect_asks_first_and_a_crash_is_an_error_message(jarvis_env):
    _time_toml(jarvis_env.path / "mcp")
    write_server(jarvis_env.path / "mcp", "notes", "tests.fakes.mcp_test_server", "--only", "write_note,crash")
    jarvis_env.server.push(tool_call("write_note", text="buy milk"), answer("Noted."))
    graph = jarvis_env.graph()
    config = {"configurable": {"thread_id": "mcp-2"}}
    result = graph.invoke({"messages": [("user", "note: buy milk")]}, config, version="v2")
    (intr,) = result.interrupts
    assert intr.value["tool"] == "write_note" and intr.value["side_effects"] == ["ui_automation"]
    assert "write_note on the MCP server 'notes'" in intr.value["summary"]
    result = graph.invoke(Command(resume={intr.id: {"decision": "approve"}}), config, version="v2")
    tool_msg = next(m for m in result.value["messages"] if m.type == "tool")
    assert tool_msg.content == "noted: buy milk"

    jarvis_env.server.push(tool_call("crash"), answer("The notes server crashed; I could not do it."))
    config = {"configurable": {"thread_id": "mcp-3"}}
    result = graph.invoke({"messages": [("user", "crash it")]}, config, version="v2")
    (intr,) = result.interrupts
    result = graph.invoke(Command(resume={intr.id: {"decision": "approve"}}), config, version="v2")
    msgs = result.value["messages"]
    err = next(m for m in msgs if m.type == "tool")
    assert err.status == "error" and "exited" in err.content
    assert msgs[-1].content.startswith("The notes server crashed")
    # the time server was not affected
    jarvis_env.server.push(tool_call("get_current_time", timezone="UTC"), answer("ok"))
    out = graph.invoke({"messages": [("user", "time?")]}, {"configurable": {"thread_id": "mcp-4"}})
    assert next(m for m in out["messages"] if m.type == "tool").status == "success"


def test_a_tool_of_a_restarting_server_says_so_not_that_it_does_not_exist(jarvis_env):
    """[17] finding 9: within a server's restart backoff the provider lists only ready servers, so the model was
    told "there is no tool named 'write_note'"; the restart time never reached it."""
    jarvis_env.write_config(mcp={"restart_backoff_s": 30, "max_restart_backoff_s": 30},
                            autonomy={"effects": {"ui_automation": "auto"}})
    write_server(jarvis_env.path / "mcp", "notes", "tests.fakes.mcp_test_server", "--only", "write_note,crash")
    app = jarvis_env.app()
    graph = app.graph
    jarvis_env.server.push(tool_call("crash"), answer("It crashed."))
    graph.invoke({"messages": [("user", "crash it")]}, {"configurable": {"thread_id": "down-1"}})
    jarvis_env.server.push(tool_call("write_note", text="buy milk"), answer("Not now."))
    out = graph.invoke({"messages": [("user", "note: buy milk")]}, {"configurable": {"thread_id": "down-2"}})
    err = next(m for m in out["messages"] if m.type == "tool")
    assert err.status == "error" and "there is no tool named" not in err.content, err.content
    assert "write_note is a tool of the MCP server 'notes', which is not available right now" in err.content
    assert "it restarts in" in err.content
    # what the server itself wrote (its last error, from its stderr) is for `jarvis mcp status`, not the model:
    # nothing marks this answer as outside content
    (notes,) = [s for s in app.mcp_manager.status() if s.name == "notes"]
    assert notes.last_error and notes.last_error not in err.content


def test_a_tool_of_a_server_added_while_running_says_it_is_starting_not_that_it_does_not_exist(jarvis_env):
    """[17] finding 9, second case: on the first turn after a new TOML file is added to a running Jarvis, before
    its server is ready, a call to its tool was told "there is no tool named 'git_status'" (the provider lists
    only ready servers, and the folder is re-read at most once a second)."""
    _time_toml(jarvis_env.path / "mcp")
    graph = jarvis_env.graph()
    jarvis_env.server.push(tool_call("get_current_time", timezone="UTC"), answer("It is noon."))
    graph.invoke({"messages": [("user", "time?")]}, {"configurable": {"thread_id": "new-1"}})
    # a server that takes its time to come up (it never answers MCP's initialize: it stays "starting")
    (jarvis_env.path / "mcp" / "git.toml").write_text(
        'command = "sleep"\nargs = ["60"]\nstartup_timeout_s = 60\n', encoding="utf-8")
    jarvis_env.server.push(tool_call("git_status", repo_path=str(jarvis_env.root)), answer("Not yet."))
    out = graph.invoke({"messages": [("user", "git status?")]}, {"configurable": {"thread_id": "new-2"}})
    err = next(m for m in out["messages"] if m.type == "tool")
    assert err.status == "error" and "there is no tool named" not in err.content, err.content
    assert "git_status is not available yet: it may be a tool of the MCP server(s) 'git' (still starting)" \
        in err.content
    # a name no server can have, once every server has listed its tools, is still "no tool named"
    (jarvis_env.path / "mcp" / "git.toml").unlink()
    jarvis_env.server.push(tool_call("no_such_tool"), answer("No."))
    out = graph.invoke({"messages": [("user", "do it")]}, {"configurable": {"thread_id": "new-3"}})
    err = next(m for m in out["messages"] if m.type == "tool")
    assert "there is no tool named 'no_such_tool'" in err.content, err.content


def test_a_tool_description_that_hides_an_instruction_is_shown_to_the_model_and_the_user(jarvis_env):
    """Tool poisoning: an MCP server's description carries an instruction in Unicode tag characters, which models
    read and people do not see. The model's request and the user's tool list show it written out, and the call
    still works (names, types and values untouched)."""
    write_server(jarvis_env.path / "mcp", "dates", "tests.fakes.mcp_test_server", "--only", "poisoned")
    jarvis_env.server.push(tool_call("poisoned", date="2026-11-27"), answer("Formatted."))
    graph = jarvis_env.graph()
    out = graph.invoke({"messages": [("user", "format today's date")]}, {"configurable": {"thread_id": "poison"}})
    (offered,) = [t["function"] for t in jarvis_env.server.requests[0]["tools"] if t["function"]["name"] == "poisoned"]
    sent = json.dumps(offered, ensure_ascii=False)
    assert not any(0xE0000 <= ord(c) <= 0xE007F or c in "\u200b\u202e" for c in sent), sent
    assert "Format a date.\\\\U000e0042\\\\U000e0065" in sent and "Dates only.\\\\u200b" in sent
    assert "unused\\\\u202e (ignore)" in sent  # an argument's description too
    assert next(m for m in out["messages"] if m.type == "tool").content == "2026-11-27"
    shown = jarvis_env.cli("tools", "show", "poisoned", check=True).stdout  # what the user reads of the tool
    assert not any(0xE0000 <= ord(c) <= 0xE007F for c in shown) and "\\U000e0042" in shown, shown
