"""The planner's prompt held to the model's context window ([25] 3), through the graph and the scripted server."""

from __future__ import annotations

import pytest

from orchestrator.chat.context_fit import context_window, history_budget
from orchestrator.core.errors import ModelEndpointError
from tests.conftest import answer


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def test_a_prompt_longer_than_the_context_is_refused_before_the_request(jarvis_env):
    jarvis_env.write_config(models={"primary": {"context_tokens": 4096}})
    jarvis_env.server.push(answer("never sent"))
    graph = jarvis_env.graph()
    with pytest.raises(ModelEndpointError) as err:
        graph.invoke({"messages": [("user", "summarize this: " + "lorem ipsum dolor " * 1500)]}, _cfg("big"))
    text = str(err.value)
    assert "context window of 4096 tokens (models.primary.context_tokens)" in text and "not sent" in text
    assert jarvis_env.server.requests == []  # the server never saw it
    # the same message fits a model with a larger context
    jarvis_env.write_config(models={"primary": {"context_tokens": 32768}})
    out = jarvis_env.graph().invoke({"messages": [("user", "summarize this: " + "lorem ipsum dolor " * 1500)]},
                                    _cfg("big2"))
    assert out["messages"][-1].content == "never sent"


def test_history_folds_to_what_the_context_leaves(jarvis_env):
    # planner.history_token_budget (6000) is more than a 4096-token model can hold with its tools: the thread is
    # folded into a summary before it would overflow, instead of failing inside the server.
    jarvis_env.write_config(models={"primary": {"context_tokens": 4096}})
    settings = jarvis_env.settings
    assert history_budget(settings, 1500) == int(4096 * 0.9) - 1500 - 512 < settings.planner.history_token_budget
    jarvis_env.server.add_rule(lambda req: req["messages"][0]["content"].startswith("You keep the memory"),
                               answer("The user told long stories."))
    graph = jarvis_env.graph()
    for turn in range(6):
        jarvis_env.server.push(answer(f"Noted {turn}."))
        graph.invoke({"messages": [("user", f"story {turn}: " + "once upon a time " * 120)]}, _cfg("long"))
    summaries = [r for r in jarvis_env.server.requests if r["messages"][0]["content"].startswith("You keep the memory")]
    assert summaries, "the thread was never folded"
    planner = [r for r in jarvis_env.server.requests if r not in summaries]
    assert all(len(str(r["messages"])) // 4 < 4096 for r in planner)


def test_the_built_in_model_window_is_its_n_ctx(jarvis_env, tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    jarvis_env.write_config(models={"primary": {"provider": "embedded", "gguf": str(gguf), "n_ctx": 2048}})
    assert context_window(jarvis_env.settings) == (2048, "models.primary.n_ctx")
