"""Each model family on the built-in backend is told its own words (orchestrator/llm/family_prompts.py): Qwen's
handler shows Qwen the words measured to help it, SmolLM2's prompt for the same request stays what it was, byte for
byte (tests/data/smollm2_first_request_prompt.txt: rendered before the family prompts existed), and Qwen's call
repeated as its answer comes back as that call alone, which Jarvis answers with the results."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp")

from orchestrator.llm import llama_handler, qwen_handler  # noqa: E402
from orchestrator.llm.family_prompts import QWEN, FamilyPrompt  # noqa: E402

SMOLLM2_PROMPT = Path(__file__).resolve().parent / "data" / "smollm2_first_request_prompt.txt"


def planner_request(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A newcomer's first request as the planner sends it: its system text (at a fixed hour), the file tools and
    find_tools, each schema as the model is sent it (chat/planner.py openai_schema)."""
    from integrations.fs_tools import build_fs_tools
    from orchestrator.chat.planner import _system_text, openai_schema
    from orchestrator.tools.index import find_tools_tool

    system = _system_text(datetime(2026, 1, 5, 9), "UTC", False, None, None)
    tools = [openai_schema(t) for t in [*build_fs_tools([root]), find_tools_tool(None, list)]]  # type: ignore[arg-type]
    return [{"role": "system", "content": system}, {"role": "user", "content": "list the files in my folder"}], tools


def _argument(prompt: str, tool: str, argument: str) -> str:
    """An argument's description as a Qwen prompt lists it (one tool a line inside <tools>)."""
    for line in prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines():
        fn = json.loads(line)["function"]
        if fn["name"] == tool:
            return fn["parameters"]["properties"][argument].get("description", "")
    raise AssertionError(f"{tool} is not listed")


def test_smollm2s_prompt_is_the_one_it_had(tmp_path):
    """The three words measured on Qwen broke SmolLM2's first run when every model got them: SmolLM2's handler,
    shown the planner's first request, renders the prompt it rendered before them."""
    messages, tools = planner_request(tmp_path)
    assert llama_handler.render_prompt(messages, tools) == SMOLLM2_PROMPT.read_text()


def test_qwen_is_told_its_own_words(tmp_path):
    messages, tools = planner_request(tmp_path)
    sent = json.dumps(tools)
    prompt = qwen_handler.qwen_prompt(messages, tools, None)
    assert _argument(prompt, "fs_list_dir", "path") == \
        "folder to list, relative to the user's folder ('.' is the user's folder itself)"
    assert _argument(prompt, "fs_search", "folder") == \
        "folder to search recursively, relative to the user's folder ('.' is the user's folder itself)"
    assert _argument(prompt, "find_tools", "query") == "what the tool should do, in the user's words"
    assert "convert currency" not in prompt
    # what the planner sends (and so any model behind an OpenAI-compatible server) keeps the shared words
    assert json.dumps(tools) == sent and "e.g. 'convert currency'" in sent
    assert "convert currency" in qwen_handler.render_prompt(messages, tools)
    # the rest of the prompt is the template's: the system text, the request, the other tools as sent
    assert prompt.startswith("<|im_start|>system\n" + messages[0]["content"] + "\n\n# Tools\n")
    read = next(t for t in tools if t["function"]["name"] == "fs_read_text")
    assert json.dumps(read) in prompt


def test_a_familys_system_words_go_at_the_end_of_the_system_text():
    family = FamilyPrompt(system="Dates are ISO 8601.")
    asked = [{"role": "system", "content": "You are Jarvis."}, {"role": "user", "content": "hi"}]
    assert family.messages(asked) == [{"role": "system", "content": "You are Jarvis.\n\nDates are ISO 8601."},
                                      {"role": "user", "content": "hi"}]
    assert asked[0]["content"] == "You are Jarvis."  # the request itself is not changed
    assert family.messages(asked[1:]) == [{"role": "system", "content": "Dates are ISO 8601."}, asked[1]]


def test_qwen_reads_a_result_as_the_tools_and_is_asked_to_answer_from_it():
    """Qwen's template gives a result back as a user turn with no tool named: "call the bank" read from a to-do file
    was taken for the user's request and refused. Qwen's prompt names the tool each result came from and asks for
    an answer from it; the result's own text follows unchanged, and a result whose call is not in view stays as
    it came."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "id": "c1", "function": {"name": "fs_read_text", "arguments": '{"path": "todo.txt"}'}}]}
    asked = [{"role": "system", "content": "You are Jarvis."}, {"role": "user", "content": "read todo.txt"}, call,
             {"role": "tool", "tool_call_id": "c1", "content": "call the bank\nbuy stamps\n"},
             {"role": "tool", "tool_call_id": "gone", "content": "an orphan"}]
    shown = QWEN.messages(asked)
    assert shown[:3] == asked[:3]  # the system text, and so the prompt's prefix, as it was
    assert shown[3]["content"] == "fs_read_text returned:\ncall the bank\nbuy stamps\n"
    assert shown[4] == asked[4] and shown[5] == {"role": "system", "content": QWEN.after_results}
    assert asked[3]["content"] == "call the bank\nbuy stamps\n" and len(asked) == 5  # the request is not changed
    prompt = qwen_handler.qwen_prompt(asked, [], None)
    assert "<tool_response>\nfs_read_text returned:\ncall the bank" in prompt
    assert prompt.endswith(f"<|im_start|>system\n{QWEN.after_results}<|im_end|>\n<|im_start|>assistant\n")
    # before any result, nothing is added: the first call is chosen from the request as the planner sent it
    assert QWEN.messages(asked[:2]) == asked[:2]
    # SmolLM2's ChatML prompt is not changed by it
    assert "fs_read_text returned" not in llama_handler.render_prompt(asked, [])


class _Scripted:
    """A llama.cpp model at the handler's boundary: what it writes for each kind of completion the handler asks."""

    metadata = None
    _input_ids: list[int] = []

    def __init__(self, first: str, call: str, answer: str):
        self.first, self.call, self.answer = first, call, answer
        self.asked: list[str] = []

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> list[int]:
        return list(range(len(text) // 4))

    def create_completion(self, prompt: str, max_tokens: int | None = None, stream: bool = False,
                          stop: list[str] | None = None, **_: Any) -> Any:
        # The handler asks for words with a stop at an opened <tool_call>; a call it asks for (opened by the model
        # itself or after the handler's own <tool_call>) stops at the call's end instead.
        kind = ("first" if (max_tokens or 99) <= 4 else "answer" if qwen_handler.OPEN in (stop or []) else "call")
        self.asked.append(kind)
        text = {"first": self.first, "call": self.call, "answer": self.answer}[kind]
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}
        done = {"id": "c", "object": "text_completion", "created": 0, "model": "qwen", "choices": [choice],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        if not stream:
            return done
        return iter([{**done, "choices": [{**choice, "finish_reason": None}]},
                     {**done, "choices": [{**choice, "text": "", "finish_reason": "stop"}]}])


class _NoStates:
    """No saved prompt states: the scripted model has no context to save or restore."""

    def restore(self, llama: Any, ids: list[int]) -> None:
        pass

    def save(self, llama: Any) -> None:
        pass


class _StatesFor(dict):
    def setdefault(self, key: Any, default: Any = None) -> Any:
        return _NoStates()


@pytest.mark.parametrize("stream", [False, True])
def test_qwens_call_repeated_after_its_result_is_answered_with_the_result(monkeypatch, stream):
    """After fs_list_dir's result Qwen 0.5B opened the same call again; asked for words it wrote that call as JSON
    with the listing as more JSON after it, which the user got as the answer. The call comes back restated, its
    arguments alone (the model is not asked for words at all), and the graph shows the results instead of it."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from orchestrator.chat.planner import finalize_message, results_instead_of_restated_call

    monkeypatch.setattr(qwen_handler, "_states", _StatesFor())
    call = '{"name": "fs_list_dir", "arguments": {"path": "."}}'
    model = _Scripted(first="{", call=call, answer=call + '\n{"name": "notes", "type": "dir", "size": null}')
    messages = [{"role": "user", "content": "list the files in my folder"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "fs_list_dir", "arguments": '{"path": "."}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": '[{"name": "notes", "type": "dir"}]'}]
    tools = [{"type": "function", "function": {"name": "fs_list_dir", "description": "List a folder.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
    reply = qwen_handler.jarvis_qwen_tools(model, messages, tools=tools, temperature=0, max_tokens=64, stream=stream)
    if stream:
        chunks = list(reply)
        text = "".join((c["choices"][0]["delta"].get("content") or "") for c in chunks if c["choices"])
        assert chunks[-1]["usage"]["prompt_tokens"] == 1 and chunks[-2]["choices"][0]["finish_reason"] == "stop"
    else:
        assert reply["choices"][0]["finish_reason"] == "stop"
        text = reply["choices"][0]["message"]["content"]
    assert json.loads(text) == {"path": "."}
    assert "answer" not in model.asked
    # not read back as a call to run again (a whole call was: it came back round after round, then no answer)
    assert not finalize_message(AIMessage(text), ["fs_list_dir"]).tool_calls
    history = [HumanMessage("list the files in my folder"),
               AIMessage("", tool_calls=[{"name": "fs_list_dir", "args": {"path": "."}, "id": "c1"}]),
               ToolMessage('[{"name": "notes", "type": "dir"}]', tool_call_id="c1", name="fs_list_dir"),
               AIMessage(text)]
    shown = results_instead_of_restated_call(history)
    assert shown is not None and '[{"name": "notes", "type": "dir"}]' in shown


def test_a_call_opened_after_qwens_rounds_are_spent_is_answered_with_the_results(monkeypatch):
    """"What time is it?": Qwen 0.5B called time_now round after round; its rounds spent, asked for words it wrote
    another call as JSON, which the graph ran, until the planner's step limit. Its last call comes back restated."""
    from langchain_core.messages import AIMessage

    from orchestrator.chat.planner import finalize_message

    monkeypatch.setattr(qwen_handler, "_states", _StatesFor())
    again = '{"name": "time_now", "arguments": {"zone": "UTC"}}'
    model = _Scripted(first="{", call=again, answer=again)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "what time is it?"}]
    for i, args in enumerate(("{}", '{"zone": "local"}', '{"zone": "Europe/Paris"}')):
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": f"c{i}", "type": "function", "function": {"name": "time_now", "arguments": args}}]},
                     {"role": "tool", "tool_call_id": f"c{i}", "content": "09:00"}]
    tools = [{"type": "function", "function": {"name": "time_now", "description": "The time.", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string"}}}}}]
    reply = qwen_handler.jarvis_qwen_tools(model, messages, tools=tools, temperature=0, max_tokens=64)
    text = reply["choices"][0]["message"]["content"]
    assert json.loads(text) == {"zone": "Europe/Paris"} and "answer" not in model.asked
    assert not finalize_message(AIMessage(text), ["time_now"]).tool_calls
