"""JARB with a real model, end to end (seed 002's flow 11.2): the code-writing model is Qwen2.5-Coder-1.5B on the
built-in backend (`make test-models` fetches it) as `models.heavy`; it writes word_count and its tests from the spec,
the sandbox runs them (repairs as needed), the user approves the registration, and the new tool answers a call.

The planner is scripted (it only asks for the tool and then calls it): what is proven here is that a model that
runs on this machine writes code and tests that pass Jarvis's own pipeline, not that a small model plans well
(bench/builtin_models.py measures that)."""

from __future__ import annotations

import pytest
from langgraph.types import Command

from tests.conftest import answer, tool_call
from tests.jarb_helpers import WORD_COUNT_SPEC, spec_call
from tests.real_model_fuzz import QWEN_15B, require_qwen


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1800)  # a hang guard: the model's time depends on the machine's load
def test_the_built_in_coder_model_writes_tests_and_registers_a_tool_that_then_answers(jarvis_env):
    # The 0.5B model wrote tests that contradict the spec (word_count('hello world') == 7) and never imported the
    # tool, through every repair; the 1.5B one writes a correct tool and passing tests.
    gguf = require_qwen(QWEN_15B)
    jarvis_env.write_config(
        sandbox={"required": True}, autonomy={"effects": {"tool_create": "auto"}},
        jarb={"max_repairs": 2},
        models={"heavy": {"provider": "embedded", "gguf": str(gguf), "model": "qwen2.5-coder-1.5b",
                          "chat_format": "jarvis-tools", "n_ctx": 4096, "max_tokens": 600, "timeout_s": 900,
                          "max_retries": 0, "api_key": "none", "temperature": 0, "threads": 2}})
    jarvis_env.server.push(spec_call(WORD_COUNT_SPEC), tool_call("word_count", text="the quick brown fox jumps"),
                           answer("There are 5 words."))
    graph = jarvis_env.graph()
    config = {"configurable": {"thread_id": "jarb-real"}}
    result = graph.invoke({"messages": [("user", "how many words in 'the quick brown fox jumps'?")]}, config,
                          version="v2")
    asked = []
    while result.interrupts:
        asked += [i.value for i in result.interrupts]
        result = graph.invoke(Command(resume={i.id: {"decision": "approve"} for i in result.interrupts}), config,
                              version="v2")
    messages = result.value["messages"]
    built = next(m for m in messages if m.type == "tool" and m.name == "create_new_tool")
    assert built.status == "success" and "Registered word_count v1" in built.content, built.content
    called = next(m for m in messages if m.type == "tool" and m.name == "word_count")
    assert called.content == "5"
    assert any(a["tool"] == "word_count" for a in asked)  # a new tool's first call asks
    written = (jarvis_env.path / "tools" / "tests" / "test_word_count_v1.py").read_text()
    assert "word_count(" in written and "assert" in written  # the model's own tests, which passed in the sandbox
