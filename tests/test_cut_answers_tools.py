"""[17] finding 3 in the last two model callers: JARB's code writer and the summaries (PDF, YouTube, the document
index) used an answer cut off (a stream closed without a finish_reason, or `finish_reason: length`) as if whole.
The orchestrator passes its judgement (llm/answer_end.checked_reply) into both, since integrations/ and
jarb_core/ do not import it; the scripted server plays the cut stream and the token-limit stop."""

from __future__ import annotations

import pytest

from integrations.base import ToolError
from orchestrator.chat.turns import stream_turn
from tests.conftest import answer
from tests.fakes.pdfs import write_pdf
from tests.jarb_helpers import (
    FIXED_WORD_COUNT, WORD_COUNT_SPEC, WORD_COUNT_TESTS, fenced, is_code_request, is_jarb_request, is_repair_request,
    is_tests_request, spec_call,
)


def _registered(jarvis_env) -> list[str]:
    from orchestrator.jarb.tools import open_registry

    return sorted(open_registry(jarvis_env.settings).names())


def _jarb_turn(jarvis_env, thread: str) -> list[dict]:
    return list(stream_turn(jarvis_env.graph(), thread, {"messages": [("user", "count the words of 'a b c'")]}))


def test_code_stopped_at_the_token_limit_is_never_tested_registered_or_run(jarvis_env):
    """The module below is whole-looking Python (it would pass its tests), but the model said it was stopped at
    its token limit: it used to be tested in the sandbox and registered. It is not; and since the endpoint works,
    the turn goes on: create_new_tool fails with the reason (it used to end the turn with a model error), and the
    planner tells the user."""
    jarvis_env.write_config(models={"primary": {"max_tokens": 64}}, autonomy={"effects": {"tool_create": "auto"}})
    server = jarvis_env.server
    server.add_rule(is_code_request, {**fenced(FIXED_WORD_COUNT), "finish_reason": "length"})
    server.add_rule(is_tests_request, fenced(WORD_COUNT_TESTS))
    server.add_rule(is_repair_request, fenced(FIXED_WORD_COUNT))
    server.push(spec_call(WORD_COUNT_SPEC))
    server.push(answer("I could not build word_count: my token limit cut its code off. Raise max_tokens."))

    events = _jarb_turn(jarvis_env, "cut-code")
    assert not [e for e in events if e["event"] == "error"], events
    assert events[-1]["event"] == "done" and "could not build word_count" in events[-1]["content"]
    told = _tool_result(server, "create_new_tool")
    assert told.startswith("Nothing was registered: could not build word_count"), told
    assert "cut off at its token limit (models.primary.max_tokens = 64)" in told, told
    assert "the code of the new tool word_count" in told and "tested, registered or run" in told
    assert "Raise the limit" in told
    assert not any(e["event"] == "progress" and e.get("stage") in ("run_tests", "register") for e in events)
    assert [r for r in server.requests if is_tests_request(r)] == []  # nothing after the cut answer
    assert "word_count" not in _registered(jarvis_env)
    assert not (jarvis_env.path / "tools" / "word_count_v1.py").exists()


def test_a_repair_stopped_at_the_token_limit_ends_the_attempt_not_the_turn(jarvis_env):
    """The first module fails its tests; the repair is stopped at the token limit: nothing more is tested, the
    planner hears why, the turn ends with its answer."""
    jarvis_env.write_config(models={"primary": {"max_tokens": 64}}, autonomy={"effects": {"tool_create": "auto"}})
    server = jarvis_env.server
    server.add_rule(is_code_request, fenced(FIXED_WORD_COUNT.replace("len(", "1 + len(")))
    server.add_rule(is_tests_request, fenced(WORD_COUNT_TESTS))
    server.add_rule(is_repair_request, {**fenced(FIXED_WORD_COUNT), "finish_reason": "length"})
    server.push(spec_call(WORD_COUNT_SPEC))
    server.push(answer("I could not build word_count."))

    events = _jarb_turn(jarvis_env, "cut-repair")
    assert not [e for e in events if e["event"] == "error"], events
    told = _tool_result(server, "create_new_tool")
    assert "cut off at its token limit" in told and "Attempts: attempt 1:" in told, told
    assert len([e for e in events if e["event"] == "progress" and e.get("stage") == "run_tests"
                and e.get("ok") is not None]) == 1  # the first module's tests only: the cut repair is not run
    assert "word_count" not in _registered(jarvis_env)


def _tool_result(server, name: str) -> str:
    """The last result of tool `name` the planner was shown (the scripted server's requests)."""
    for request in reversed(server.requests):
        for message in reversed(request.get("messages") or []):
            if message.get("role") == "tool" and message.get("name", name) == name:
                return message.get("content") or ""
    raise AssertionError(f"the planner was never shown a result of {name}")


def test_tests_cut_mid_stream_are_never_run(jarvis_env):
    jarvis_env.write_config(autonomy={"effects": {"tool_create": "auto"}})
    server = jarvis_env.server
    server.add_rule(is_code_request, fenced(FIXED_WORD_COUNT))
    server.add_rule(is_tests_request, {**fenced(WORD_COUNT_TESTS), "cut_stream": True})
    server.push(spec_call(WORD_COUNT_SPEC))

    events = _jarb_turn(jarvis_env, "cut-tests")
    message = next(e for e in events if e["event"] == "error")["message"]
    assert "stopped in the middle of the tests of the new tool word_count" in message, message
    assert not any(e["event"] == "progress" and e.get("stage") in ("run_tests", "register") for e in events)
    assert len([r for r in server.requests if is_jarb_request(r)]) == 2  # the code, the tests: no repair after
    assert "word_count" not in _registered(jarvis_env)


def _summary_tools(jarvis_env) -> dict:
    write_pdf(jarvis_env.root / "memo.pdf", 1, title="Memo")
    return {t.name: t for t in jarvis_env.app().document_tools()}


def test_a_summary_stopped_at_the_token_limit_is_refused(jarvis_env):
    jarvis_env.write_config(models={"primary": {"max_tokens": 20}})
    tools = _summary_tools(jarvis_env)
    path = str(jarvis_env.root / "memo.pdf")
    jarvis_env.server.push({"content": "The memo says that the committee", "finish_reason": "length"})
    with pytest.raises(ToolError) as info:
        tools["pdf_summarize"].func(path)
    message = str(info.value)
    assert "cut off at its token limit" in message and "max_tokens = 20" in message, message
    assert "a summary or an answer from a document" in message and "Raise the limit" in message
    assert "The memo says" not in message

    jarvis_env.server.push({"content": "The committee reviewed the figures (p. 1)."})
    assert "The committee reviewed the figures (p. 1)." in tools["pdf_summarize"].func(path)


def test_a_summary_cut_mid_stream_is_refused(llm_server):
    """The App's summary model does not stream; a streaming one given to the summaries is judged the same way."""
    from langchain_openai import ChatOpenAI

    from integrations.summarize import ModelSource, ask_model, checked_model
    from orchestrator.llm.answer_end import checked_reply

    model = ChatOpenAI(base_url=llm_server.base_url, api_key="test", model="scripted-model", max_retries=0,
                       timeout=20, streaming=True)
    source = ModelSource(checked_model(model, lambda reply, llm: checked_reply(reply, llm, "the summary")))
    llm_server.push({"content": "The first half of a summ", "cut_stream": True})
    with pytest.raises(ToolError, match="stopped in the middle of the summary"):
        ask_model(source.get(), "system", "summarize")
    llm_server.push({"content": "A whole summary."})
    assert ask_model(source.get(), "system", "summarize") == "A whole summary."
