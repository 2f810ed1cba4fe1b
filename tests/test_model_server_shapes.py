"""Compatibility suite ([17]): the exact shapes real model servers send, replayed to the real ChatOpenAI client.

Each server's answers are in tests/data/model_servers/<server>.json with the source they follow (the server's own
code or documentation). Every case goes through the planner's `call_model` as a real turn would: a text answer
keeps its text and token counts (llama.cpp's cached share too), a thinking model's reasoning is not the answer, a
call streamed in pieces or sent whole becomes one call, a call cut at the token limit is not run, and each server's
way of saying "the conversation does not fit" or "failed mid-answer" ends in a clear sentence. The requests are
checked against what each server reads (llama.cpp and Ollama ignore `max_completion_tokens`; Ollama refuses a
tool call whose arguments are not JSON). llama-cpp-python's own server is driven for real in test_model_servers.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from orchestrator.chat.planner import call_model
from orchestrator.core.config import settings_from_dict
from orchestrator.core.errors import ModelEndpointError
from orchestrator.llm.client import check_endpoint, make_chat_model
from tests.fakes.replay_server import ReplayServer, load_fixtures

FIXTURES = load_fixtures()
CASES = [(server, case["name"]) for server, data in FIXTURES.items() for case in data["cases"]]
LIST_DIR = {"type": "function", "function": {
    "name": "fs_list_dir", "description": "List a folder.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
# A thread with a finished call in it: the request then carries an assistant message with tool calls.
HISTORY = [SystemMessage("You are Jarvis."), HumanMessage("what is in my documents?"),
           AIMessage(content="", tool_calls=[{"id": "call_1", "name": "fs_list_dir",
                                              "args": {"path": "/home/me/documents"}}]),
           ToolMessage("report.pdf\nbudget.xlsx", tool_call_id="call_1"), HumanMessage("and in my notes?")]


@pytest.fixture(scope="module")
def replay():
    with ReplayServer() as server:
        yield server


def _settings(tmp_path: Path, base_url: str, model: str):
    return settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")},
                               "models": {"primary": {"base_url": base_url, "model": model, "api_key": "test",
                                                      "max_retries": 0, "timeout_s": 30, "max_tokens": 512}}},
                              tmp_path)


def _model_name(server: str) -> str:
    return FIXTURES[server]["models"]["data"][0]["id"]


def test_every_fixture_names_its_source():
    assert {"llama_cpp", "ollama", "vllm", "openai", "lm_studio"} <= set(FIXTURES)
    for server, data in FIXTURES.items():
        assert data["server"] and len(data["source"]) > 40, server
        assert all(case.get("expect") for case in data["cases"]), server


@pytest.mark.parametrize(("server", "case_name"), CASES)
def test_a_real_servers_answer_reads_as_it_should(tmp_path, replay, server, case_name):
    case = next(c for c in FIXTURES[server]["cases"] if c["name"] == case_name)
    expect = case["expect"]
    base_url = replay.base_url(server, case_name)
    llm = make_chat_model(_settings(tmp_path, base_url, _model_name(server)))
    if "error" in expect:
        with pytest.raises(ModelEndpointError) as caught:
            call_model(llm, [LIST_DIR], HISTORY, None, base_url)
        text = str(caught.value)
        assert re.search(expect["error"], text, re.S), text
        assert base_url in text  # which server, so the user knows where to look
        return
    message = call_model(llm, [LIST_DIR], HISTORY, None, base_url)
    calls = [{"name": c["name"], "args": c["args"]} for c in message.tool_calls]
    assert calls == expect.get("tool_calls", []), message
    if "content" in expect:
        assert message.content == expect["content"]
    if "content_matches" in expect:
        assert re.search(expect["content_matches"], str(message.content)), message.content
    usage = message.usage_metadata or {}
    for key, field in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
        if key in expect:
            assert usage.get(field) == expect[key], usage
    if "cache_read" in expect:
        assert (usage.get("input_token_details") or {}).get("cache_read") == expect["cache_read"], usage


@pytest.mark.parametrize("server", [s for s, d in FIXTURES.items() if d.get("request")])
def test_the_request_is_one_the_server_reads(tmp_path, replay, server):
    rules = FIXTURES[server]["request"]
    base_url = replay.base_url(server, "text")
    call_model(make_chat_model(_settings(tmp_path, base_url, _model_name(server))), [LIST_DIR], HISTORY, None,
               base_url)
    body = replay.requests[(server, "text")][-1]
    for key in rules.get("has", []):
        assert key in body, (key, sorted(body))
    for key in rules.get("lacks", []):
        assert key not in body, (key, sorted(body))
    assistant = next(m for m in body["messages"] if m.get("tool_calls"))
    assert isinstance(assistant.get("content"), str)  # llama-cpp-python refuses null; Ollama needs text or calls
    if rules.get("tool_call_arguments_are_json"):
        for call in assistant["tool_calls"]:
            assert json.loads(call["function"]["arguments"]) == {"path": "/home/me/documents"}


@pytest.mark.parametrize("server", sorted(FIXTURES))
def test_model_check_reads_each_servers_model_list(tmp_path, replay, server):
    settings = _settings(tmp_path, replay.base_url(server, "text"), _model_name(server))
    ok, detail = check_endpoint(settings)
    assert ok, detail
    wrong = _settings(tmp_path, replay.base_url(server, "text"), "no-such-model")
    ok, detail = check_endpoint(wrong)
    if server == "llama_cpp":  # one model loaded: it answers whatever name a request gives
        assert ok, detail
    else:
        assert not ok and "no-such-model" in detail, detail
