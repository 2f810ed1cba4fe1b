"""Model servers as they really behave ([17] findings 1-3), through the real ChatOpenAI client over HTTP.

The shapes of a cut stream and of a length stop are played by the scripted server; the null content of an
assistant message and the token cap are tried against llama-cpp-python's own server, started by hand with the
tiny GGUF model `make test` installs (provider `openai`, not `embedded`: the request adapter must not depend on
the provider setting).
"""

from __future__ import annotations

import os
import socket
import subprocess
import re
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from orchestrator.core.config import settings_from_dict
from orchestrator.core.errors import ModelEndpointError
from orchestrator.llm.client import make_chat_model
from orchestrator.chat.planner import call_model
from tests.conftest import REPO

GGUF = REPO / "data" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _model(tmp_path: Path, base_url: str, **primary):
    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")},
                                   "models": {"primary": {"base_url": base_url, "model": "scripted-model",
                                                          "api_key": "test", "max_retries": 0, "timeout_s": 60,
                                                          **primary}}}, tmp_path)
    return make_chat_model(settings)


def test_a_stream_cut_before_its_end_is_an_error_not_an_answer(tmp_path, llm_server):
    llm_server.push({"content": "The first half of a sentence that never", "cut_stream": True})
    with pytest.raises(ModelEndpointError, match="cut off: the connection closed"):
        call_model(_model(tmp_path, llm_server.base_url), [], [HumanMessage("hi")], None, llm_server.base_url)


def test_an_answer_stopped_at_the_token_limit_says_so(tmp_path, llm_server):
    llm_server.push({"content": "Here are the ten steps: one, two, three", "finish_reason": "length"})
    message = call_model(_model(tmp_path, llm_server.base_url, max_tokens=12), [], [HumanMessage("steps?")], None,
                         llm_server.base_url)
    assert message.content.startswith("Here are the ten steps")
    assert "cut off at the model's token limit (models.primary.max_tokens = 12)" in message.content
    llm_server.push({"content": "A complete answer."})
    done = call_model(_model(tmp_path, llm_server.base_url), [], [HumanMessage("again")], None, llm_server.base_url)
    assert done.content == "A complete answer."


@pytest.fixture(scope="module")
def llama_cpp_server():
    """llama-cpp-python's OpenAI-compatible server, as a user would start it by hand."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is not installed (make install-local)")
    if not GGUF.exists():
        if os.environ.get("JARVIS_REQUIRE_REAL_MODEL") == "1":
            pytest.fail(f"{GGUF} is missing (make demo-model)")
        pytest.skip(f"{GGUF} is missing (make demo-model)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(GGUF), "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", "2048", "--model_alias", "scripted-model"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("llama-cpp-python's server did not start")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.slow
def test_a_thread_with_a_tool_call_in_its_history_works_on_llama_cpp_python(tmp_path, llama_cpp_server):
    """The assistant message that made a call has null content in the OpenAI shape; this server refused it with
    HTTP 500, so the thread failed on every later turn."""
    history = [HumanMessage("What time is it?"),
               AIMessage(content="", tool_calls=[{"name": "time_now", "args": {}, "id": "call_1"}]),
               ToolMessage(content="2026-11-24T10:00:00+00:00", tool_call_id="call_1", name="time_now"),
               HumanMessage("Thanks. Say OK.")]
    model = _model(tmp_path, llama_cpp_server, max_tokens=8, temperature=0)
    answer = call_model(model, [], history, None, llama_cpp_server)
    assert isinstance(answer.content, str) and answer.content.strip()
    # the cap is honoured (the server ignored max_completion_tokens): the answer is at most 8 of its tokens
    root = llama_cpp_server.rsplit("/v1", 1)[0]
    tokens = httpx.post(f"{root}/extras/tokenize", json={"input": answer.content}, timeout=10).json()["tokens"]
    assert len(tokens) <= 9, (len(tokens), answer.content)


def test_tool_call_arguments_sent_as_an_object_still_make_a_call(tmp_path, llm_server):
    """[17] finding 4: a server sending the arguments as a JSON object (not text) ended in a traceback inside
    langchain-openai, before any repair could run."""
    from integrations.fs_tools import build_fs_tools

    tools = build_fs_tools([tmp_path])
    llm_server.push({"tool_calls": [{"name": "fs_list_dir", "arguments": {"path": str(tmp_path)}}],
                     "arguments_as_object": True})
    message = call_model(_model(tmp_path, llm_server.base_url), tools, [HumanMessage("what is here?")], None,
                         llm_server.base_url)
    assert message.tool_calls == [{"name": "fs_list_dir", "args": {"path": str(tmp_path)}, "id": message.tool_calls[0]["id"],
                                   "type": "tool_call"}]


def test_a_connection_closed_mid_answer_is_not_reported_as_unreachable(tmp_path, llm_server):
    """[17] finding 5: a chunked body cut mid-stream was reported as 'Cannot reach the model endpoint ... start
    Jan', though the endpoint had answered."""
    llm_server.push({"content": "unused", "close_mid_chunk": True})
    with pytest.raises(ModelEndpointError) as err:
        call_model(_model(tmp_path, llm_server.base_url), [], [HumanMessage("hi")], None, llm_server.base_url)
    assert "closed the connection in the middle of its answer" in str(err.value)
    assert "Cannot reach" not in str(err.value) and "Jan" not in str(err.value)


def test_model_check_says_when_the_server_has_no_such_model(tmp_path, llm_server):
    """[17] finding 6: `jarvis model check` said "answers" for a model name the server does not list; every
    chat then failed."""
    from orchestrator.llm.client import check_endpoint

    def settings(model):
        return settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")},
                                   "models": {"primary": {"base_url": llm_server.base_url, "model": model}}}, tmp_path)

    ok, message = check_endpoint(settings("llama-3-70b"))  # a server with one model answers with it anyway
    assert ok and "its one model 'scripted-model'" in message
    llm_server.brain.model_list = ["qwen2.5:7b", "llama3:latest"]  # a server with several (Ollama)
    ok, message = check_endpoint(settings("llama-3-70b"))
    assert not ok and "no model named 'llama-3-70b'" in message and "qwen2.5:7b" in message
    ok, message = check_endpoint(settings("llama3"))  # Ollama's default tag
    assert ok and "answers" in message


def _waiting(events):
    return [e for e in events if e["event"] == "progress" and e.get("key") == "model_wait"]


def test_a_slow_model_is_said_to_be_tried_again(jarvis_env):
    # [17] finding 7: a server that does not answer in time was tried three times, a minute each, with nothing
    # shown; each new try is now a progress event the UI and CLI show, and so is the wait within a try.
    from orchestrator.chat.turns import stream_turn, user_input

    jarvis_env.write_config(models={"primary": {"timeout_s": 2, "max_retries": 2, "progress_every_s": 0.1}})
    jarvis_env.server.push({"content": "too late", "delay_s": 4}, {"content": "There you are.", "delay_s": 1})
    events = list(stream_turn(jarvis_env.graph(), "slow", user_input("hi")))
    again = [e for e in events if e["event"] == "progress" and "trying again" in (e.get("message") or "")]
    assert again and again[0]["stage"] == "waiting for the model", events
    assert "try 2 of 3" in again[0]["message"]
    waiting = _waiting(events)
    assert {e["try"] for e in waiting} == {1, 2}, waiting  # the first try is waited for too
    assert all(e["tries"] == 3 and e["message"] == f"waiting for the model ({e['waited_s']} s, try {e['try']} of 3)"
               for e in waiting)
    assert waiting[-1]["waited_s"] >= 2  # the whole wait, across tries
    assert events[-1] == {"event": "done", "content": "There you are.", "message_id": events[-1]["message_id"]}
    # the CLI prints it
    jarvis_env.server.push({"content": "too late", "delay_s": 4}, {"content": "Here.", "delay_s": 1})
    proc = jarvis_env.cli("chat", "--thread", "slow-cli", "hi")
    assert proc.returncode == 0 and "try 2 of 3" in proc.stderr, proc.stderr
    assert re.search(r"waiting for the model \(\d+ s, try 1 of 3\)", proc.stderr), proc.stderr


def test_the_wait_for_a_model_is_shown_until_its_first_token_and_no_longer(jarvis_env):
    """Progress every `progress_every_s` from the first try on, with the seconds waited; none after the first token
    (the answer's words keep coming slowly), and no ticking thread left when the call is over."""
    from orchestrator.chat.turns import stream_turn, user_input

    jarvis_env.write_config(models={"primary": {"progress_every_s": 0.1, "max_retries": 1}})
    jarvis_env.server.push({"content": "Here is the answer, word by word.", "delay_s": 1.5, "token_delay_s": 0.15})
    events = list(stream_turn(jarvis_env.graph(), "wait", user_input("hi")))
    first_token = next(i for i, e in enumerate(events) if e["event"] == "token")
    waiting = [i for i, e in enumerate(events) if e["event"] == "progress" and e.get("key") == "model_wait"]
    assert waiting and max(waiting) < first_token, events
    seconds = [events[i]["waited_s"] for i in waiting]
    assert seconds == sorted(seconds) and seconds[-1] >= 1
    assert {events[i]["message"] for i in waiting} >= {"waiting for the model (1 s, try 1 of 2)"}
    assert events[-1]["event"] == "done" and events[-1]["content"] == "Here is the answer, word by word."
    assert not [t for t in threading.enumerate() if t.name == "model-wait"]
    # off: progress_every_s 0
    jarvis_env.write_config(models={"primary": {"progress_every_s": 0}})
    jarvis_env.server.push({"content": "Quiet.", "delay_s": 0.5})
    assert not _waiting(list(stream_turn(jarvis_env.graph(), "quiet", user_input("hi"))))


def test_the_wait_for_a_model_reaches_the_ui_stream(jarvis_env):
    """The UI gets the same waiting events on its turn stream (server-sent events), each with the key chat.js
    shows in place of the one before."""
    from tests.ui_server import start_ui

    jarvis_env.write_config(models={"primary": {"progress_every_s": 0.1}})
    with start_ui(jarvis_env) as ui:
        ui.env.server.push({"content": "Hello.", "delay_s": 1})
        events = ui.stream("/api/threads/web-wait/messages", {"text": "hi"})
    kinds = [e["event"] for e in events]
    waiting = _waiting(events)
    assert waiting and kinds.index("progress") < kinds.index("token") and kinds[-1] == "end", kinds
    assert waiting[0]["message"].startswith("waiting for the model (")
    assert waiting[0]["stage"] == "waiting for the model"


def test_every_model_caller_refuses_a_cut_answer(tmp_path, llm_server):
    """[17] finding 3 beyond the planner: the history summary, a jorb's step, the switchboard and memory
    extraction used a cut stream or a token-limit stop as if whole (a summary missing facts for good, a step's
    script half written)."""
    import asyncio

    from orchestrator.channels.switchboard import judge
    from orchestrator.chat.history import summarize
    from orchestrator.jorbs.policies import PolicyContext, llm_policy

    folded = [HumanMessage("My dentist is Ana, on Tuesdays."), AIMessage("Noted.")]
    llm_server.push({"content": "The user's dentist is", "cut_stream": True})
    with pytest.raises(ModelEndpointError, match="stopped in the middle of the summary of the earlier conversation"):
        summarize(_model(tmp_path, llm_server.base_url), None, folded, None)
    # Stopped at the token limit, the summary is kept and says it was cut: refused, every later turn of the thread
    # failed (each needs the fold; the 50-turn fuzz on the 135M model, max_tokens 64, showed it).
    llm_server.push({"content": "The user's dentist is", "finish_reason": "length"})
    assert summarize(_model(tmp_path, llm_server.base_url, max_tokens=5), None, folded, None) == (
        "The user's dentist is (This summary was cut off at the model's token limit; older details may be missing.)")
    llm_server.push({"content": "The user's dentist is Ana, on Tuesdays."})
    summary = summarize(_model(tmp_path, llm_server.base_url), None, folded, None)
    assert summary == "The user's dentist is Ana, on Tuesdays."

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")},
                                   "models": {"primary": {"base_url": llm_server.base_url}}}, tmp_path)
    ctx = PolicyContext(settings=settings, jorb={"id": "j1"}, capabilities="",
                        llm=_model(tmp_path, llm_server.base_url))
    llm_server.push({"content": '{"reasoning": "send it", "script": "jarvis.messages_send(', "cut_stream": True})
    with pytest.raises(ModelEndpointError, match="stopped in the middle of the jorb's next step"):
        asyncio.run(llm_policy(ctx, [HumanMessage("next step?")]))
    llm_server.push({"content": '{"reasoning": "send it", "script": "jarvis.messages_send(', "finish_reason": "length"})
    with pytest.raises(ModelEndpointError, match="cut off at its token limit"):
        asyncio.run(llm_policy(ctx, [HumanMessage("next step?")]))

    llm_server.push({"content": '{"jorb_id": "j1", "confidence": 0.9', "cut_stream": True})
    decision = judge(_model(tmp_path, llm_server.base_url), "email", "ana@example.com", "see you", [])
    assert decision.jorb_id is None and "stopped in the middle of the switchboard's routing" in decision.reasoning
