"""`jarvis run` warms the built-in model up (chat/warm_up.py): the server started and the planner's system text read
before the first message, which then finds it cached."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.server.services import ServiceContext, ServiceManager, model_warm_up_service
from tests.real_model_fuzz import require_real_model

SERVICE = "orchestrator.server.services:model_warm_up_service"


@pytest.mark.slow
def test_the_first_message_after_a_start_finds_the_system_text_read(jarvis_env):
    jarvis_env.write_config(models={"primary": {
        "provider": "embedded", "gguf": str(require_real_model()), "model": "smollm2-135m",
        "chat_format": "jarvis-chatml-tools", "n_ctx": 4096, "api_key": "none", "max_tokens": 8, "temperature": 0}})
    app = jarvis_env.app()
    manager = ServiceManager([SERVICE])
    asyncio.run(manager.start_all(ServiceContext(app=app, turns=None)))
    (service,) = manager.services
    service.thread.join(timeout=120)
    assert manager.report() == [{"name": "model-warm-up", "state": "finished", "detail": None}]
    out = app.graph.invoke({"messages": [("user", "Say hello.")]}, {"configurable": {"thread_id": "first"}})
    first = next(m for m in out["messages"] if getattr(m, "usage_metadata", None))
    cached = first.usage_metadata["input_token_details"]["cache_read"]
    # the system text is about 250 tokens of the model's; without the warm-up, 1 (the start token) was cached
    assert cached >= 200, first.usage_metadata
    app.close()


def test_only_the_built_in_model_is_warmed_up_and_it_can_be_turned_off(jarvis_env):
    assert model_warm_up_service(jarvis_env.settings) is None  # an OpenAI-style server: nothing to start
    builtin = {"provider": "embedded", "gguf": str(jarvis_env.path / "m.gguf"), "model": "m", "api_key": "none"}
    jarvis_env.write_config(models={"primary": builtin})
    assert model_warm_up_service(jarvis_env.settings) is not None
    jarvis_env.write_config(models={"primary": {**builtin, "warm_up": False}})
    assert model_warm_up_service(jarvis_env.settings) is None
