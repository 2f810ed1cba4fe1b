"""The built-in model's prompt reuses the server's cache ([25] 2): a turn reads again only its new messages. The
function list stays where the first request had it; tools bound since are listed next to the request that first
has them, and the lists stay where they are. The server's cache is modelled as the previous call's prompt and what
it generated, as llama.cpp keeps it, and the handler's memory of the last layout as the handler keeps it."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("llama_cpp")

from orchestrator.llm.llama_handler import (  # noqa: E402
    cached_prefix, plan_layout, render_layout, render_prompt, with_cached,
)


def _tool(name: str, description: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                            "required": ["path"]}}}


STABLE = [_tool("fs_read_text", "Read a text file."), _tool("fs_list_dir", "List a folder."),
          _tool("time_now", "The time."), _tool("gmail_search", "Search Gmail.")]
CHANGING = [[_tool("fs_read_text", "Read a text file."), _tool("fs_list_dir", "List a folder.")],
            [_tool("gmail_search", "Search Gmail."), _tool("time_now", "The time.")]]


class _Server:
    """What the handler sees of llama.cpp: the text it evaluated last (the previous call's prompt and its output),
    and the latest requests' layouts, which the handler keeps. With `states`, it also holds the texts of earlier
    calls, as the built-in model's server does (llm/prompt_states.py)."""

    def __init__(self, states: bool = False) -> None:
        self.evaluated = ""
        self.saved: list[str] = []
        self.states = states
        self.layouts: list = []

    def held(self, head: str) -> bool:
        return any(text.startswith(head) for text in [self.evaluated, *self.saved])

    def call(self, messages: list[dict], tools: list[dict], output: str) -> tuple[str, str]:
        """(prompt, the part of it read again)."""
        layout = plan_layout(messages, tools, cached=self.held, previous=self.layouts)
        self.layouts.insert(0, layout)
        prompt = render_layout(messages, layout, bool(tools))
        read = prompt[max(len(os.path.commonprefix([text, prompt])) for text in [self.evaluated, *self.saved]):]
        self.evaluated = prompt + output
        if self.states:
            self.saved.append(self.evaluated)
        return prompt, read


def _thread(turns: int, tools_of_turn, server: _Server | None = None) -> list[tuple[str, str]]:
    """(prompt, text the call reads again) for each model call of a thread whose every turn calls a tool."""
    messages: list[dict] = [{"role": "system", "content": "You are Jarvis."}]
    server = server or _Server()

    def call(output: str) -> tuple[str, str]:
        return server.call(messages, tools_of_turn(turn), output)

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


def test_with_tools_changing_every_turn_the_lists_stay_and_only_new_tools_are_listed_again():
    calls = _thread(8, lambda turn: CHANGING[turn % 2])
    for prompt, read in calls[4:]:  # from the third turn on, every tool has been listed once
        assert "functions:" not in read, read
        assert len(read) < 0.25 * len(prompt), (len(read), len(prompt))
    prompt, read = calls[2]  # turn 1 binds two tools the list does not hold: only they are listed, next to it
    assert "please read file 0" not in read and "You can call these functions" not in read, read
    assert "You can also call these functions:\nfunctions." in read and "functions.gmail_search: Search Gmail." in read
    last = calls[-2][0]
    assert last.count("You can call these functions") == 1 and last.count("You can also call these functions") == 1
    assert last.index("please read file 0") < last.index("You can also call these functions") \
        < last.index("please read file 1")
    assert "Functions for this request: functions.gmail_search" not in calls[-2][1]  # named only where they fit


def test_after_the_tools_grow_only_the_new_tools_are_read():
    """A thread binds new tools (chat/tool_binding.py): that turn reads only them and its own messages, and the
    turns after it read again only their own messages."""
    calls = _thread(8, lambda turn: STABLE[:2] if turn < 3 else STABLE)
    grown_prompt, grown_read = calls[6]  # turn 3's first call
    assert "You can call these functions" not in grown_read and "please read file 2" not in grown_read
    assert "functions.time_now" in grown_read and "functions.gmail_search" in grown_read
    assert "functions.fs_read_text:" not in grown_read.split("Functions for this request")[0]  # listed once, before
    for prompt, read in calls[2:]:
        assert len(read) < 0.25 * len(prompt), (len(read), len(prompt))


def test_when_the_server_holds_another_threads_prompt_the_list_goes_before_the_first_request():
    server = _Server()
    a = [{"role": "system", "content": "You are Jarvis."}, {"role": "user", "content": "please read file 0"}]
    server.call(a, STABLE, 'functions.fs_read_text:\n{"path": "f0"}')
    a += [{"role": "assistant", "content": "Read."}, {"role": "user", "content": "please read file 1"}]
    b = [{"role": "system", "content": "You are Jarvis. Earlier: a summary."}, {"role": "user", "content": "time?"}]
    server.call(b, STABLE[:2], "message:\nnoon")  # another thread in between: the server holds its prompt now
    prompt, read = server.call(a, STABLE, "message:\nok")
    assert "You can also call" not in prompt and prompt.count("You can call these functions") == 1
    assert prompt.index("You can call these functions") < prompt.index("please read file 0")


def test_a_new_thread_gets_its_own_list_not_the_one_another_thread_left():
    """The server holds another thread's list (the same system text): ordered for another request, it is not kept."""
    server = _Server()
    b = [{"role": "system", "content": "You are Jarvis."}, {"role": "user", "content": "what time is it"}]
    server.call(b, STABLE[:2], "message:\nnoon")
    a = [{"role": "system", "content": "You are Jarvis."}, {"role": "user", "content": "please read file 0"}]
    prompt, read = server.call(a, STABLE, "message:\nok")
    assert "You can also call" not in prompt and prompt.count("You can call these functions") == 1
    listed = prompt[prompt.index("You can call these functions"):]
    assert listed.index("functions.fs_read_text") < listed.index("functions.time_now")


def test_a_later_step_that_binds_a_new_tool_lists_it_after_the_newest_message():
    server = _Server()
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "read file a"}]
    server.call(messages, STABLE[:1], 'functions.fs_read_text:\n{"path": "a"}')
    messages += [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                  "function": {"name": "fs_read_text", "arguments": '{"path": "a"}'}}]},
                 {"role": "tool", "tool_call_id": "c", "content": "text of a"}]
    prompt, read = server.call(messages, STABLE[:2], "message:\nok")
    assert "You can call these functions" not in read and "text of a" in read, read  # the first list is kept
    assert prompt.index("text of a") < prompt.index("You can also call these functions:\nfunctions.fs_list_dir")
    assert prompt.endswith("<|im_start|>assistant\n")


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


def test_two_threads_alternating_on_a_server_with_saved_states_each_read_only_their_new_messages():
    """A jorb works while the user chats, or two threads alternate: with the states the server saves, each caller's
    list stays where its own first request put it, though the other caller's request came last."""
    server = _Server(states=True)
    threads = {"a": [{"role": "system", "content": "You are Jarvis."}],
               "b": [{"role": "system", "content": "You are Jarvis. Earlier: a summary."}]}
    reads = []
    for turn in range(4):
        for name, tools in (("a", STABLE), ("b", CHANGING[turn % 2])):
            messages = threads[name]
            messages.append({"role": "user", "content": f"please read file {name}{turn}"})
            prompt, read = server.call(messages, tools, f"message:\nRead {name}{turn}.")
            messages.append({"role": "assistant", "content": f"Read {name}{turn}."})
            reads.append((name, turn, prompt, read))
    for name, turn, prompt, read in reads:
        if turn >= 2:  # every tool of both threads listed once
            assert "You can call these functions" not in read and len(read) < 0.3 * len(prompt), (name, turn, read)
            assert prompt.count("You can call these functions") == 1
