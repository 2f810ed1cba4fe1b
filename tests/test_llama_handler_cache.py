"""The built-in model's prompt reuses the server's cache ([25] 2): with the same tools bound turn after turn, a
turn reads again only its new messages (the function list stays where the first request had it); when the tools
change every turn, the list goes next to the request as before. The server's cache is modelled as the previous
call's prompt and what it generated, as llama.cpp keeps it."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("llama_cpp")

from orchestrator.llm.llama_handler import cached_prefix, render_prompt, with_cached  # noqa: E402


def _tool(name: str, description: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                            "required": ["path"]}}}


STABLE = [_tool("fs_read_text", "Read a text file."), _tool("fs_list_dir", "List a folder."),
          _tool("time_now", "The time."), _tool("gmail_search", "Search Gmail.")]
CHANGING = [[_tool("fs_read_text", "Read a text file."), _tool("fs_list_dir", "List a folder.")],
            [_tool("gmail_search", "Search Gmail."), _tool("time_now", "The time.")]]


def _thread(turns: int, tools_of_turn) -> list[tuple[str, str]]:
    """(prompt, text the call reads again) for each model call of a thread whose every turn calls a tool."""
    messages: list[dict] = [{"role": "system", "content": "You are Jarvis."}]
    server = ""  # what the server evaluated last: the previous call's prompt and its output

    def call(output: str) -> tuple[str, str]:
        nonlocal server
        prompt = render_prompt(messages, tools_of_turn(turn), cached=lambda head: server.startswith(head))
        read = prompt[len(os.path.commonprefix([server, prompt])):]
        server = prompt + output
        return prompt, read

    out = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"please read file {turn}"})
        out.append(call(f'functions.fs_read_text:\n{{"path": "f{turn}"}}'))
        messages.append({"role": "assistant", "content": None, "tool_calls": [{"id": f"c{turn}", "type": "function",
                         "function": {"name": "fs_read_text", "arguments": f'{{"path": "f{turn}"}}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": f"text of file {turn}"})
        out.append(call(f"message:\nFile {turn} is read."))
        messages.append({"role": "assistant", "content": f"File {turn} is read."})
    return out


def test_with_the_same_tools_a_turn_reads_again_only_its_new_messages():
    calls = _thread(8, lambda turn: STABLE)
    for prompt, read in calls[2:]:  # from the second turn on
        assert "You can call these functions" not in read, read
        assert len(read) < 0.25 * len(prompt), (len(read), len(prompt))
    # the list is where the first request had it, once; the latest request's best match is named next to it
    last_prompt, last_read = calls[-2]
    assert last_prompt.count("You can call these functions") == 1
    assert last_prompt.index("You can call these functions") < last_prompt.index("please read file 0")
    assert "Functions for this request: functions.fs_read_text" in last_read


def test_with_tools_changing_every_turn_the_list_goes_next_to_the_request():
    calls = _thread(8, lambda turn: CHANGING[turn % 2])
    prompt, read = calls[-2]
    assert prompt.index("please read file 6") < prompt.index("You can call these functions") \
        < prompt.index("please read file 7")
    assert "please read file 5" not in read  # the earlier turns are reused, not read again


def test_after_the_tools_grow_the_list_stays_where_that_turn_put_it():
    """A thread binds a new tool (chat/tool_binding.py): that turn reads the list again next to its request, and
    the turns after it find the list there and read again only their own messages."""
    calls = _thread(8, lambda turn: STABLE[:2] if turn < 3 else STABLE)
    grown_prompt, grown_read = calls[6]  # turn 3's first call
    assert "You can call these functions" in grown_read
    for prompt, read in calls[8:]:
        assert "You can call these functions" not in read, read
        assert len(read) < 0.25 * len(prompt), (len(read), len(prompt))
    last = calls[-2][0]
    assert last.count("You can call these functions") == 1
    assert last.index("please read file 2") < last.index("You can call these functions") < last.index("please read file 3")


def test_the_list_is_ordered_by_the_users_words_not_by_the_context_jarvis_adds():
    from orchestrator.llm.context_block import CONTEXT_MARKER

    memory = _tool("memory_update", "Update a remembered fact.")
    block = CONTEXT_MARKER + "What you remember (the [m<id>] is what memory_update takes):\n- [m1] a fact"
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "please read the text file" + block}]
    prompt = render_prompt(messages, [memory, *STABLE])
    listed = prompt[prompt.index("You can call these functions"):]
    assert listed.index("functions.fs_read_text") < listed.index("functions.memory_update")


def test_a_prompt_nothing_of_which_is_cached_puts_the_list_first():
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "one"},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "two"}]
    prompt = render_prompt(messages, STABLE, cached=lambda head: False)
    assert prompt.index("You can call these functions") < prompt.index("one")


def test_cached_tokens_are_the_evaluated_prefix_and_reported_as_openai_does():
    assert cached_prefix([1, 2, 3, 9], [1, 2, 3, 4, 5]) == 3
    assert cached_prefix([1, 2, 3], [1, 2, 3]) == 2  # the last token is read again for its logits
    assert cached_prefix([], [1, 2]) == 0
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    assert with_cached(usage, 7)["prompt_tokens_details"] == {"cached_tokens": 7}
    assert with_cached(usage, 70)["prompt_tokens_details"] == {"cached_tokens": 10}
    assert with_cached(None, 3) is None
