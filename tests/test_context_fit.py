"""The planner's prompt held to the model's context window ([25] 3), through the graph and the scripted server."""

from __future__ import annotations

import pytest

from orchestrator.chat.context_fit import context_window, history_budget
from orchestrator.core.errors import ModelEndpointError
from orchestrator.llm.server_window import ServerWindows
from tests.conftest import answer
from tests.fakes.llm_server import FakeLLMServer


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
    assert history_budget(settings, ServerWindows(), 1500) == int(4096 * 0.9) - 1500 - 512 < settings.planner.history_token_budget
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
    assert context_window(jarvis_env.settings, ServerWindows()) == (2048, "models.primary.n_ctx")


def test_the_window_is_asked_of_a_llama_cpp_server_once_and_the_config_wins(jarvis_env):
    brain = jarvis_env.server.brain
    brain.props = {"default_generation_settings": {"n_ctx": 3072, "n_predict": -1}, "total_slots": 1}
    windows = ServerWindows()
    window, source = context_window(jarvis_env.settings, windows)
    assert window == 3072 and "default_generation_settings.n_ctx in GET" in source and "/props" in source
    for _ in range(3):
        context_window(jarvis_env.settings, windows)
    assert brain.gets.count("/props") == 1  # asked once, kept
    jarvis_env.write_config(models={"primary": {"context_tokens": 16384}})
    assert context_window(jarvis_env.settings, windows) == (16384, "models.primary.context_tokens")
    assert brain.gets.count("/props") == 1


def test_a_vllm_window_is_its_max_model_len_and_a_prompt_beyond_it_is_refused(jarvis_env):
    jarvis_env.server.brain.model_fields = {"max_model_len": 2048}
    message = "summarize this: " + "lorem ipsum dolor " * 450  # about 2,000 tokens: fits 8,192, not 2,048
    jarvis_env.server.push(answer("never sent"))
    with pytest.raises(ModelEndpointError) as err:
        jarvis_env.graph().invoke({"messages": [("user", message)]}, _cfg("vllm"))
    text = str(err.value)
    assert "context window of 2048 tokens (the server's max_model_len in GET" in text and "not sent" in text
    assert jarvis_env.server.requests == []
    assert "raise models.primary.context_tokens" in text


@pytest.mark.parametrize("props", [
    {"n_ctx": "4096"}, {"n_ctx": -1}, {"n_ctx": 10**12}, {"n_ctx": True}, {"default_generation_settings": [4096]},
    {"n_ctx": 4096, "pad": "x" * (2 << 20)},
])
def test_a_window_the_server_cannot_mean_is_not_taken(jarvis_env, props):
    jarvis_env.server.brain.props = props
    window, source = context_window(jarvis_env.settings, ServerWindows())
    assert window == 8192 and "unset: the default" in source


def test_an_older_llama_cpp_server_says_n_ctx_at_the_top(jarvis_env):
    jarvis_env.server.brain.props = {"n_ctx": 6144}
    assert context_window(jarvis_env.settings, ServerWindows())[0] == 6144


def test_a_window_is_not_carried_to_the_next_server_on_the_same_address(jarvis_env):
    # Found in CI: the windows were kept for the whole process by address, so a server started later on the
    # port a 2048-token vLLM had used was taken for it, and a turn that fits its 8192 tokens was refused.
    brain = jarvis_env.server.brain
    brain.model_fields = {"max_model_len": 2048}
    first = jarvis_env.app()
    assert context_window(first.settings, first.runtime.windows)[0] == 2048
    port = jarvis_env.server.port
    jarvis_env.server.stop()
    with FakeLLMServer(port=port) as again:
        again.push(answer("fits"))
        message = "summarize this: " + "lorem ipsum dolor " * 450  # about 2,000 tokens: fits 8,192, not 2,048
        out = jarvis_env.graph().invoke({"messages": [("user", message)]}, _cfg("same-port"))
        assert out["messages"][-1].content == "fits"
