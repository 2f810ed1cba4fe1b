"""The built-in model's server reuses a thread's prompt from its cache and says so ([25] 2): the real SmolLM2-135M
behind the real embedded server, over HTTP, with Jarvis's own tool schemas."""

from __future__ import annotations

import json

import httpx
import pytest

from integrations.fs_tools import build_fs_tools
from integrations.time_tools import build_time_tools
from orchestrator.chat.planner import openai_schema
from tests.real_model_fuzz import builtin_model_server


def _streamed(client: httpx.Client, body: dict) -> tuple[dict, dict]:
    """(usage, the assistant message) of a streamed chat completion."""
    usage, content, calls = {}, "", {}
    with client.stream("POST", "/chat/completions", json=body) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                content += delta.get("content") or ""
                for call in delta.get("tool_calls") or []:
                    slot = calls.setdefault(call["index"], {"id": "", "type": "function",
                                                            "function": {"name": "", "arguments": ""}})
                    slot["id"] = call.get("id") or slot["id"]
                    for key in ("name", "arguments"):
                        slot["function"][key] += (call.get("function") or {}).get(key) or ""
    return usage, {"content": content, "tool_calls": list(calls.values())}


@pytest.mark.slow
def test_the_second_request_of_a_thread_is_read_from_the_cache(jarvis_env):
    server = builtin_model_server(jarvis_env)
    tools = [openai_schema(t) for t in build_fs_tools([jarvis_env.root]) + build_time_tools("UTC")]
    messages = [{"role": "system", "content": "You are Jarvis, a helpful assistant."},
                {"role": "user", "content": "Say hello."}]
    usages = []
    with httpx.Client(base_url=server.base_url, timeout=120, trust_env=False) as client:
        for follow_up in ("What time is it?", "Say goodbye."):
            # streamed, as Jarvis asks (the server's non-streamed answers keep only the three counts of usage)
            body = {"model": "smollm2-135m", "temperature": 0, "max_tokens": 16, "tools": tools, "messages": messages,
                    "stream": True}
            usage, said = _streamed(client, body)
            usages.append(usage)
            messages = [*messages, {"role": "assistant", "content": said.get("content") or "",
                                    **({"tool_calls": said["tool_calls"]} if said.get("tool_calls") else {})}]
            if said.get("tool_calls"):
                messages.append({"role": "tool", "tool_call_id": said["tool_calls"][0]["id"], "content": "done"})
            messages.append({"role": "user", "content": follow_up})
    first, second = usages
    assert 0 <= first["prompt_tokens_details"]["cached_tokens"] < first["prompt_tokens"]
    # the function list and the first turn come from the cache: only the new messages are read
    cached = second["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 0.8 * second["prompt_tokens"], (first, second)


@pytest.mark.slow
def test_a_request_that_binds_more_tools_reads_only_them_and_itself(jarvis_env):
    """A thread binds a new tool (chat/tool_binding.py): the first request's prompt, its list included, still comes
    from the cache; the new tool is listed next to the request. Before, the whole list moved there and the
    conversation after its old place was read again."""
    server = builtin_model_server(jarvis_env)
    fs = [openai_schema(t) for t in build_fs_tools([jarvis_env.root])]
    clock = [openai_schema(t) for t in build_time_tools("UTC")]
    messages = [{"role": "system", "content": "You are Jarvis, a helpful assistant."},
                {"role": "user", "content": "Say hello."}]
    with httpx.Client(base_url=server.base_url, timeout=120, trust_env=False) as client:
        body = {"model": "smollm2-135m", "temperature": 0, "max_tokens": 16, "messages": messages, "stream": True}
        first, said = _streamed(client, {**body, "tools": fs})
        messages = [*messages, {"role": "assistant", "content": said.get("content") or "",
                                **({"tool_calls": said["tool_calls"]} if said.get("tool_calls") else {})}]
        if said.get("tool_calls"):
            messages.append({"role": "tool", "tool_call_id": said["tool_calls"][0]["id"], "content": "done"})
        messages.append({"role": "user", "content": "What time is it?"})
        second, _ = _streamed(client, {**body, "messages": messages, "tools": fs + clock})
    assert second["prompt_tokens_details"]["cached_tokens"] >= first["prompt_tokens"] - 1, (first, second)


@pytest.mark.slow
def test_a_thread_s_prompt_comes_back_from_the_cache_after_another_s_request(jarvis_env):
    """Two callers alternate on the one server (a chat thread and a jorb, two threads): each request used to find the
    other's prompt evaluated and read its own again from the start (llm/prompt_states.py). Now the first caller's
    prompt is restored, and the answer is the one the server gives when it held that prompt itself."""
    server = builtin_model_server(jarvis_env)
    tools = [openai_schema(t) for t in build_fs_tools([jarvis_env.root])]

    def thread(name: str) -> list[dict]:
        return [{"role": "system", "content": f"You are {name}, a helpful assistant. " + " ".join(
                    f"Note {i}: {name}'s item {i} is on shelf {i % 7}." for i in range(16))},
                {"role": "user", "content": "Say hello."}]

    body = {"model": "smollm2-135m", "temperature": 0, "max_tokens": 16, "stream": True, "tools": tools}
    alpha, beta = thread("Alpha"), thread("Beta")
    with httpx.Client(base_url=server.base_url, timeout=120, trust_env=False) as client:
        _, said = _streamed(client, {**body, "messages": alpha})
        follow = [*alpha, {"role": "assistant", "content": said["content"]}, {"role": "user", "content": "Say goodbye."}]
        _streamed(client, {**body, "messages": beta})  # the other caller, in between
        restored, answer = _streamed(client, {**body, "messages": follow})
        # The reference: the server holds the first request's prompt and answer itself (asked again just before),
        # so the follow-up reads the same new tokens in the same batch (llama.cpp's sums differ with the batch).
        _streamed(client, {**body, "messages": alpha})
        live, again = _streamed(client, {**body, "messages": follow})
    assert restored["prompt_tokens_details"]["cached_tokens"] >= 0.8 * restored["prompt_tokens"], restored
    assert live["prompt_tokens_details"]["cached_tokens"] == restored["prompt_tokens_details"]["cached_tokens"]
    assert answer == again, (answer, again)
