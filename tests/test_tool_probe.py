"""Checking a model's tool calling before the user relies on it (orchestrator/llm/tool_probe.py): one probe with one
tool says whether the server sends a real tool call, writes the call as text (repaired by llm/model_output.py), or
ignores tools (a plain llama.cpp server without --jinja), in the real servers' replayed shapes, through
`jarvis model check` and `jarvis doctor` (subprocesses against the scripted server) and Settings (a running server).
"""

from __future__ import annotations

import pytest

from orchestrator.core.config import settings_from_dict
from orchestrator.llm.tool_probe import PROBE_MAX_TOKENS, probe_tool_calls
from tests.fakes.replay_server import ReplayServer, load_fixtures
from tests.test_doctor import check, doctor
from tests.ui_server import start_ui

FIXTURES = load_fixtures()
NATIVE = [server for server, data in FIXTURES.items() if any(c["name"] == "tool_call" for c in data["cases"])]


@pytest.fixture(scope="module")
def replay():
    with ReplayServer() as server:
        yield server


def _probe(tmp_path, replay, server: str, case: str):
    model = FIXTURES[server]["models"]["data"][0]["id"]
    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}, "models": {"primary": {
        "base_url": replay.base_url(server, case), "model": model, "api_key": "test", "timeout_s": 30,
        "max_tokens": 4096}}}, tmp_path)
    return probe_tool_calls(settings)


@pytest.mark.parametrize("server", NATIVE)
def test_a_real_tool_call_is_said_to_be_one(tmp_path, replay, server):
    found = _probe(tmp_path, replay, server, "tool_call")
    assert (found.outcome, found.ok, found.fix) == ("native", True, None), found
    assert "fs_list_dir" in found.message
    sent = replay.requests[(server, "tool_call")][-1]
    assert [t["function"]["name"] for t in sent["tools"]] == ["fs_list_dir"]
    # one short answer: the probe does not let a chatty model write 4096 tokens
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == PROBE_MAX_TOKENS


def test_a_call_written_as_text_is_said_to_be_repaired(tmp_path, replay):
    found = _probe(tmp_path, replay, "lm_studio", "call_fell_back_to_text")
    assert found.outcome == "text" and found.ok is True, found
    assert "as text" in found.message and "repairs" in found.message


def test_a_server_that_ignores_tools_is_a_problem_with_its_fix(tmp_path, replay):
    found = _probe(tmp_path, replay, "llama_cpp", "text")
    assert found.outcome == "ignored" and found.ok is False, found
    assert "cannot use Jarvis's tools" in found.message and "Your notes folder has 3 files." in found.message
    assert "--jinja" in found.fix and "tool calling" in found.fix


def test_model_check_says_which_of_the_three(jarvis_env):
    brain = jarvis_env.server.brain
    brain.load([{"content": "Your notes folder has report.txt and todo.md."}])
    proc = jarvis_env.cli("model", "check")
    assert proc.returncode == 1, proc
    assert "primary tools: ignores tools" in proc.stderr and "--jinja" in proc.stderr, proc.stderr
    assert brain.requests[-1]["tools"][0]["function"]["name"] == "fs_list_dir"

    brain.load([{"content": '```json\n{"name": "fs_list_dir", "arguments": {"path": "/home/me/notes"}}\n```'}])
    proc = jarvis_env.cli("model", "check")
    assert proc.returncode == 0, proc
    assert "primary tools: writes its tool calls as text" in proc.stdout and "Jarvis repairs" in proc.stdout

    brain.load([{"tool_calls": [{"name": "fs_list_dir", "arguments": {"path": "/home/me/notes"}}]}])
    proc = jarvis_env.cli("model", "check")
    assert proc.returncode == 0 and "primary tools: calls tools" in proc.stdout, proc


def test_doctor_reports_a_model_that_ignores_tools(jarvis_env):
    jarvis_env.write_config(server={"port": 0})
    jarvis_env.server.brain.load([{"content": "Here are your files: a.txt, b.txt."}])
    _, report = doctor(jarvis_env)
    tools = check(report, "model tools (primary)")
    assert tools["ok"] is False and "ignores tools" in tools["detail"] and "--jinja" in tools["fix"], tools
    assert check(report, "model (primary)")["ok"]


def test_settings_probes_on_request_and_then_shows_it(jarvis_env):
    with start_ui(jarvis_env) as server, server.client() as c:
        assert c.get("/api/settings/health?sections=false").json()["models"][0]["tools"] is None  # never probed
        jarvis_env.server.brain.load([{"content": "You have three files."}])
        found = c.post("/api/settings/models/primary/tools").json()
        assert found["outcome"] == "ignored" and found["ok"] is False and "--jinja" in found["fix"]
        shown = c.get("/api/settings/health?sections=false").json()["models"][0]["tools"]
        assert shown == found  # kept: the header says "ignores tools" without asking the model again
        assert c.post("/api/settings/models/nobody/tools").status_code == 404
