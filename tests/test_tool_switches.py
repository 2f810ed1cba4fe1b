"""Tools switched off and on (static, MCP and generated alike) from the web UI's API and `jarvis tools
disable|enable`: what the planner and jorb scripts then get, and what a call to a disabled tool answers."""

from __future__ import annotations

import json

import pytest

from tests.conftest import answer, tool_call
from tests.jarb_helpers import FIXED_WORD_COUNT, WORD_COUNT_SPEC, WORD_COUNT_TESTS
from tests.test_jarb_cli import run
from tests.ui_server import start_ui


def offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


@pytest.fixture
def ui(jarvis_env):
    # Every tool is bound each turn (no retrieval), so a missing one is missing because it is disabled.
    jarvis_env.write_config(planner={"max_bound_tools": 200})
    with start_ui(jarvis_env) as server:
        yield server


def test_a_disabled_tool_is_not_offered_and_a_call_to_it_is_refused(ui):
    srv = ui.env.server
    with ui.client() as c:
        tools = {t["name"]: t for t in c.get("/api/tools").json()["tools"]}
        assert tools["fs_list_dir"]["enabled"] and tools["fs_list_dir"]["can_disable"]
        assert tools["create_new_tool"]["can_disable"] is False
        assert c.post("/api/tools/create_new_tool/disable").status_code == 400
        assert c.post("/api/tools/no_such_tool/disable").status_code == 404
        assert c.post("/api/tools/fs_list_dir/enable").status_code == 409
        assert c.post("/api/tools/fs_list_dir/disable", json={"note": "testing"}).json() == {"name": "fs_list_dir",
                                                                                          "enabled": False}
        assert {t["name"]: t["enabled"] for t in c.get("/api/tools").json()["tools"]}["fs_list_dir"] is False
    # The planner no longer gets it; a call anyway is answered with why.
    srv.push(tool_call("fs_list_dir", path=str(ui.env.root)), answer("I cannot list folders now."))
    events = ui.stream("/api/threads/web-off/messages", {"text": "what is in my folder?"})
    assert "fs_list_dir" not in offered(srv.requests[0]) and "fs_read_text" in offered(srv.requests[0])
    told = [m for m in srv.requests[1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "the user disabled the tool fs_list_dir" in told and "jarvis tools enable fs_list_dir" in told
    assert next(e for e in events if e["event"] == "done")["content"] == "I cannot list folders now."
    # find_tools does not reach it either.
    from orchestrator.tools.switches import ToolSwitches

    assert ToolSwitches(ui.env.settings).is_disabled("fs_list_dir")
    assert "fs_list_dir" not in ui.app.state.jarvis.runtime.catalog.names()
    with ui.client() as c:
        assert c.post("/api/tools/fs_list_dir/enable").json() == {"name": "fs_list_dir", "enabled": True}
    srv.push(answer("ok"))
    ui.stream("/api/threads/web-on/messages", {"text": "hi"})
    assert "fs_list_dir" in offered(srv.requests[-1])


def test_jarvis_tools_disable_and_enable_a_static_tool(jarvis_env):
    listed = {r["name"]: r for r in json.loads(run(jarvis_env, "tools", "list", "--json", check=True).stdout)}
    assert listed["time_now"]["status"] == "active"
    off = run(jarvis_env, "tools", "disable", "time_now", check=True)
    assert "time_now: disabled (static tool" in off.stdout
    listed = {r["name"]: r for r in json.loads(run(jarvis_env, "tools", "list", "--json", check=True).stdout)}
    assert listed["time_now"]["status"] == "disabled"
    assert "time_now" not in jarvis_env.app().runtime.catalog.names()
    assert "--version is only for generated tools" in run(jarvis_env, "tools", "enable", "time_now", "--version", "1").stderr
    assert "no tool named nope" in run(jarvis_env, "tools", "disable", "nope").stderr
    assert run(jarvis_env, "tools", "enable", "time_now", check=True).stdout.startswith("time_now: enabled")
    assert "time_now is not disabled" in run(jarvis_env, "tools", "enable", "time_now").stderr
    assert "time_now" in jarvis_env.app().runtime.catalog.names()


def test_a_disabled_tool_is_missing_from_jorb_scripts_too(jarvis_env):
    from tests.app_helpers import jorb_service
    from orchestrator.tools.switches import ToolSwitches
    from tests.test_jorbs import step

    ToolSwitches(jarvis_env.settings).disable("time_now")
    jarvis_env.server.push(step(reasoning="time?", script="jarvis.time.now()"), step(reasoning="ok", done=True))
    view = jorb_service(jarvis_env.settings).create("Clock", "Tell the time")
    assert "jarvis.time.now" not in jarvis_env.server.requests[0]["messages"][0]["content"]
    assert "is not a capability of this jorb" in view.state.script_results[0].error


def test_a_generated_tool_is_switched_in_the_registry_like_the_cli_does(ui):
    from orchestrator.jarb.tools import make_factory, open_registry

    record, report = make_factory(ui.env.settings).register_files(
        json.dumps(WORD_COUNT_SPEC), FIXED_WORD_COUNT, WORD_COUNT_TESTS, approve_network=lambda s, m: False)
    assert record is not None, report.output
    srv = ui.env.server
    with ui.client() as c:
        tool = next(t for t in c.get("/api/tools").json()["tools"] if t["name"] == "word_count")
        assert tool["source"] == "generated" and tool["enabled"] and tool["can_disable"]
        assert c.post("/api/tools/word_count/disable").json() == {"name": "word_count", "enabled": False, "version": None}
        assert open_registry(ui.env.settings).get("word_count") is None  # what `jarvis tools disable` does
        # No provider offers it now; it is still listed, switched off, so it can be enabled again.
        tool = next(t for t in c.get("/api/tools").json()["tools"] if t["name"] == "word_count")
        assert tool["enabled"] is False and tool["metadata"]["version"] == 1
    srv.push(answer("ok"))
    ui.stream("/api/threads/web-gen-off/messages", {"text": "count the words in 'a b'"})
    assert "word_count" not in offered(srv.requests[-1])
    with ui.client() as c:
        assert c.post("/api/tools/word_count/enable").json() == {"name": "word_count", "enabled": True, "version": 1}
    srv.push(answer("ok"))
    ui.stream("/api/threads/web-gen-on/messages", {"text": "count the words in 'a b'"})
    assert "word_count" in offered(srv.requests[-1])
