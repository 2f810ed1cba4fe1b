"""The built-in model's tool calls (chat_format jarvis-chatml-tools, orchestrator/llm/llama_handler.py): written under
a constraint, every call names a tool it was given and carries arguments that fit that tool's schema.

The real SmolLM2-135M behind the real embedded server, over HTTP, with Jarvis's own tool schemas."""

from __future__ import annotations

import json
import sys

import httpx
import jsonschema
import pytest

from integrations.fs_tools import build_fs_tools
from integrations.time_tools import build_time_tools
from orchestrator.chat.planner import openai_schema
from tests.real_model_fuzz import builtin_model_server, require_real_model


def _tools(root):
    tools = build_fs_tools([root]) + build_time_tools("UTC")
    return [openai_schema(t) for t in tools]


def test_the_request_words_put_the_matching_tools_first():
    pytest.importorskip("llama_cpp")
    from orchestrator.llm.llama_handler import rank_for_request

    tools = [{"type": "function", "function": {"name": n, "description": d}} for n, d in (
        ("fs_list_dir", "List a folder."), ("fs_read_text", "Read a text file."),
        ("fs_write_text", "Write text to a file."), ("time_now", "The current time."))]
    names = lambda ranked: [t["function"]["name"] for t in ranked]  # noqa: E731
    assert names(rank_for_request(tools, "write hello to note.txt"))[0] == "fs_write_text"
    assert names(rank_for_request(tools, "What time is it?"))[0] == "time_now"
    assert names(rank_for_request(tools, "Which files are in my folder?"))[0] == "fs_list_dir"
    # a word of the name counts more than words of a description
    docs = {"type": "function", "function": {"name": "docs_search",
                                             "description": "Search everything Jarvis has read (PDFs, notes)."}}
    assert names(rank_for_request([docs, *tools], "Read notes.txt."))[0] == "fs_read_text"
    # no word in common: the planner's order stays
    assert names(rank_for_request(tools, "hi")) == names(tools)


def test_a_call_written_under_the_constraint_is_split_into_name_and_arguments():
    pytest.importorskip("llama_cpp")
    from orchestrator.llm.llama_handler import split_call

    assert split_call('fs_read_text:\n{"path": "a.txt"}\n', ["fs_read_text"]) == ("fs_read_text", '{"path": "a.txt"}')
    # cut off by max_tokens: what was written goes on, and Jarvis's executor says the arguments are incomplete
    assert split_call('fs_read_text:\n{"path": "a.t', ["fs_read_text"]) == ("fs_read_text", '{"path": "a.t')
    assert split_call("", ["time_now"]) == ("time_now", "")


@pytest.mark.slow
def test_the_tiny_model_makes_valid_calls_for_simple_requests(jarvis_env):
    server = builtin_model_server(jarvis_env)
    tools = _tools(jarvis_env.root)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    requests = ["List the files in my folder.", "Read list.txt.", "Write hello to note.txt.", "What time is it?",
                "Show me what is in notes.txt.", "Add 'buy milk' to the file todo.txt."]
    calls = []
    with httpx.Client(base_url=server.base_url, timeout=120, trust_env=False) as client:
        for text in requests:
            body = {"model": "smollm2-135m", "temperature": 0, "max_tokens": 96, "tools": tools, "tool_choice": "required",
                    "messages": [{"role": "system", "content": "You are Jarvis, a helpful assistant."},
                                 {"role": "user", "content": text}]}
            reply = client.post("/chat/completions", json=body)
            assert reply.status_code == 200, reply.text
            choice = reply.json()["choices"][0]
            assert choice["finish_reason"] == "tool_calls", choice
            (call,) = choice["message"]["tool_calls"]
            calls.append((text, call["function"]["name"], call["function"]["arguments"]))
            print(f"  {text!r} -> {calls[-1][1]} {calls[-1][2]}", file=sys.stderr)
    for text, name, arguments in calls:
        assert name in schemas, (text, name)
        jsonschema.validate(json.loads(arguments), schemas[name])  # complete JSON that fits the tool's schema
    # the words of the request lead the tiny model to the tool that does it
    chosen = {text: name for text, name, _ in calls}
    assert chosen["Write hello to note.txt."] == "fs_write_text", calls


@pytest.mark.long
@pytest.mark.slow
def test_a_turn_on_the_built_in_model_counts_its_tokens(jarvis_env):
    # llama-cpp-python's server sends no usage in a stream; the handler closes its streams with OpenAI's usage
    # chunk, so `jarvis runs` no longer shows 0/0 tokens for every turn on the built-in model ([17] item 8).
    gguf = require_real_model()
    from orchestrator.storage import writer
    from orchestrator.storage.telemetry import list_runs
    from orchestrator.chat.turns import stream_turn, user_input

    jarvis_env.write_config(models={"primary": {
        "provider": "embedded", "gguf": str(gguf), "model": "smollm2-135m", "chat_format": "jarvis-chatml-tools",
        "n_ctx": 4096, "api_key": "none", "max_tokens": 24, "temperature": 0}},
        # Two tools bound and tool writing off: the counting is the same, and the two turns' prompts are 1,471
        # tokens instead of 5,820, which a 135M model reads at about 150 a second (18 s against 141 s here)
        planner={"max_bound_tools": 2, "max_thread_tools": 2}, jarb={"enabled": False})
    (jarvis_env.root / "notes.txt").write_text("Buy bread.\n")
    for thread, text in (("usage-words", "Say hello."), ("usage-call", "Read notes.txt.")):
        events = list(stream_turn(jarvis_env.graph(), thread, user_input(text)))
        assert events[-1]["event"] == "done", events[-1]
        writer.flush()  # runs are written by a background writer
        (run,) = list_runs(jarvis_env.settings, limit=5, thread_id=thread)
        assert run.prompt_tokens > 0 and run.completion_tokens > 0, (thread, run)
