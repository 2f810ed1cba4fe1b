"""Repairs of what small models send (orchestrator/llm/model_output.py), alone and through the real graph."""

from __future__ import annotations

import json
import warnings

from langchain_core.messages import AIMessage

from orchestrator.llm.model_output import (
    recover_calls, repeated_json_object, repeated_name, restates_call, sanitize_message, strip_prose_fence,
)
from tests.conftest import answer, tool_call

KNOWN = {"fs_list_dir", "fs_read_text", "fs_write_text", "fs_search", "time_now"}


def test_repeated_name_is_repaired_only_when_exact():
    assert repeated_name("fs_list_dir" * 300, KNOWN) == "fs_list_dir"
    assert repeated_name("time_nowtime_now", KNOWN) == "time_now"
    assert repeated_name("fs_list_dir", KNOWN) is None  # already fine
    assert repeated_name("fs_list_dirfs_list_di", KNOWN) is None  # not an exact repetition
    assert repeated_name("fs_list_dirfs_read_text", KNOWN) is None
    assert repeated_name("rm_rfrm_rf", KNOWN) is None  # unknown tool: left for the executor to refuse


def test_repeated_arguments_object():
    assert repeated_json_object('{"path": "/a"}{"path": "/a"}{"path": "/a"}') == {"path": "/a"}
    assert repeated_json_object('{"path": "/a"}') == {"path": "/a"}
    assert repeated_json_object('{"path": "/a"}{"path": "/b"}') is None
    assert repeated_json_object('{"path": "/a"') is None


def test_json_call_in_content_is_recovered_in_its_usual_wrappings():
    bare = '{"name": "fs_list_dir", "arguments": {"path": "/tmp"}}'
    for content in (
        bare,
        f"```json\n{bare}\n```",
        f"<tool_call>\n{bare}\n</tool_call>",
        f"<tool_call>[{bare}]</tool_call>",
        '{"name": "fs_list_dir", "parameters": {"path": "/tmp"}}',
        '{"function": {"name": "fs_list_dir", "arguments": "{\\"path\\": \\"/tmp\\"}"}}',
        f"Sure, let me look.\n```\n{bare}\n```",
    ):
        found = recover_calls(content, KNOWN)
        assert found is not None, content
        calls, _rest = found
        assert [(c["name"], c["args"]) for c in calls] == [("fs_list_dir", {"path": "/tmp"})], content


def test_json_that_is_not_a_known_call_stays_text():
    assert recover_calls('{"name": "delete_everything", "arguments": {}}', KNOWN) is None
    assert recover_calls('{"city": "Paris", "temperature": 21}', KNOWN) is None
    assert recover_calls('{"name": "fs_list_dir", "arguments": "not json"}', KNOWN) is None
    long_prose = "Here is how a call looks in general. " * 20
    assert recover_calls(long_prose + '```json\n{"name": "fs_list_dir", "arguments": {"path": "/"}}\n```', KNOWN) is None


def test_lone_prose_fence_is_stripped_but_code_is_kept():
    assert strip_prose_fence("```\nThe folder holds two files.\n```") == "The folder holds two files."
    assert strip_prose_fence("```text\nhello\n```\n") == "hello"
    assert strip_prose_fence("```python\nprint('hi')\n```") is None
    assert strip_prose_fence("Intro\n```\nx\n```") is None


def test_sanitize_message_leaves_clean_messages_alone():
    msg = AIMessage(content="Hello!", tool_calls=[{"name": "time_now", "args": {}, "id": "c1"}])
    out, repairs = sanitize_message(msg, KNOWN)
    assert out is msg and not repairs


def test_sanitize_repairs_invalid_call_with_repeated_name_and_arguments():
    msg = AIMessage(content="", invalid_tool_calls=[{"name": "fs_list_dir" * 3, "args": '{"path": "/x"}{"path": "/x"}',
                                                      "id": "c1", "error": "bad json"}])
    out, repairs = sanitize_message(msg, KNOWN)
    assert out.tool_calls == [{"name": "fs_list_dir", "args": {"path": "/x"}, "id": "c1", "type": "tool_call"}]
    assert out.invalid_tool_calls == [] and repairs


def test_repeated_name_through_the_graph(jarvis_env):
    (jarvis_env.root / "a.txt").write_text("x")
    jarvis_env.server.push(tool_call("fs_list_dir" * 200, path=str(jarvis_env.root)), answer("One file: a.txt."))
    out = jarvis_env.graph().invoke({"messages": [("user", "list my folder")]}, {"configurable": {"thread_id": "r1"}})
    tool_msg = next(m for m in out["messages"] if m.type == "tool")
    assert tool_msg.name == "fs_list_dir" and tool_msg.status == "success" and "a.txt" in tool_msg.content
    assert out["messages"][-1].content == "One file: a.txt."


def test_json_call_in_content_still_needs_confirmation(jarvis_env):
    target = jarvis_env.root / "note.txt"
    call = {"name": "fs_write_text", "arguments": {"path": str(target), "content": "hi"}}
    jarvis_env.server.push(answer(f"```json\n{json.dumps(call)}\n```"), answer("Done."))
    graph = jarvis_env.graph()
    config = {"configurable": {"thread_id": "r2"}}
    result = graph.invoke({"messages": [("user", "write hi to note.txt")]}, config, version="v2")
    assert result.interrupts and result.interrupts[0].value["tool"] == "fs_write_text"
    assert not target.exists()  # nothing runs before the user says so
    from langgraph.types import Command

    result = graph.invoke(Command(resume={result.interrupts[0].id: {"decision": "deny"}}), config, version="v2")
    assert not target.exists()
    assert result.value["messages"][-1].content == "Done."


def test_unknown_and_prose_arguments_go_back_to_the_model(jarvis_env):
    jarvis_env.server.push(tool_call("list_files", path="/"), tool_call("fs_list_dir", path="the folder with my notes"),
                           answer("```\nI could not find it.\n```"))
    out = jarvis_env.graph().invoke({"messages": [("user", "where are my notes")]}, {"configurable": {"thread_id": "r3"}})
    tools = [m for m in out["messages"] if m.type == "tool"]
    assert "no tool named 'list_files'" in tools[0].content and tools[0].status == "error"
    assert "does not exist" in tools[1].content and tools[1].status == "error"
    assert out["messages"][-1].content == "I could not find it."


def test_a_call_written_as_code_is_recovered_only_when_it_is_all_calls_to_known_tools():
    for content in (
        '```python\nfs_list_dir(path="/tmp")\n```',
        '```\nfunctions.fs_list_dir({"path": "/tmp"})\n```',
        'fs_list_dir(path="/tmp")',
        'functions.fs_list_dir: {"path": "/tmp"}',
        'fs_list_dir:\n{"path": "/tmp"}',
        'I will look.\n```py\nfs_list_dir(path="/tmp")\n```',
    ):
        found = recover_calls(content, KNOWN)
        assert found is not None, content
        assert [(c["name"], c["args"]) for c in found[0]] == [("fs_list_dir", {"path": "/tmp"})], content
    two = recover_calls('```python\nfs_read_text(path="a.txt")\ntime_now()\n```', KNOWN)
    assert two is not None and [c["name"] for c in two[0]] == ["fs_read_text", "time_now"]
    for content in (
        '```python\ndef reverse(s):\n    return s[::-1]\n```',  # code the user asked for, not a call
        '```python\nfs_list_dir(path="/tmp")\nprint("done")\n```',  # not only calls
        '```python\nos.system("rm -rf /")\n```',
        'fs_list_dir(path=__import__("os").getcwd())',  # not a literal: never evaluated
        'fs_list_dir(**{"path": "/tmp"})',
        'delete_everything(path="/")',  # unknown tool
        'The answer is 42.',
        'fs_list_dir("/tmp")',  # a positional value: which argument it is, only the tool knows
    ):
        assert recover_calls(content, KNOWN) is None, content


def test_a_model_text_with_an_unknown_escape_is_read_without_a_warning():
    # ast.parse warns on "\\s" in a string literal; the model's text is data, and the warning reached the test log
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = recover_calls('fs_search(folder="/tmp", name_pattern="a\\s*b")', KNOWN)
        assert found is not None and found[0][0]["args"] == {"folder": "/tmp", "name_pattern": "a\\s*b"}
        assert recover_calls('print("\\d")', KNOWN) is None


def test_a_call_written_as_code_goes_through_the_graph_as_a_call(jarvis_env):
    (jarvis_env.root / "a.txt").write_text("x")
    jarvis_env.server.push(answer(f'```python\nfs_list_dir(path="{jarvis_env.root}")\n```'), answer("One file: a.txt."))
    out = jarvis_env.graph().invoke({"messages": [("user", "list my folder")]}, {"configurable": {"thread_id": "r4"}})
    tool_msg = next(m for m in out["messages"] if m.type == "tool")
    assert tool_msg.name == "fs_list_dir" and tool_msg.status == "success" and "a.txt" in tool_msg.content
    assert out["messages"][-1].content == "One file: a.txt."


def test_an_answer_that_only_repeats_the_call_is_told_apart():
    """The built-in 135M model's answers after a tool result, word for word from a run of test_real_model."""
    listed = [{"name": "fs_list_dir", "args": {"path": "myfolder.txt"}, "id": "c1"}]
    read = [{"name": "fs_read_text", "args": {"path": "notes.txt", "max_bytes": 1024}, "id": "c2"}]
    assert restates_call('{"path": "myfolder.txt"}\n```', listed)
    assert restates_call('"function.fs_read_text:\n{"path": "notes.txt", "max_bytes": 1024}\nThis is a function '
                         "that reads and writes text files", read)
    assert restates_call('"functions.fs_list_dir:\n{"path": "myfolder.txt"}\n```', listed)
    # answers that say something are answers, JSON in them or not
    assert not restates_call("Your folder has notes.txt and list.txt.", listed)
    assert not restates_call('The file says: {"path": "notes.txt"} is the setting.', read)
    assert not restates_call('{"path": "another.txt"}', listed)  # not the call that was made
    assert not restates_call("functions.fs_write_text: {}", listed)  # a call to a tool that was not called
    # Qwen2.5-Coder-0.5B's answers after a result, from a run of bench/builtin_models.py: a whole call
    assert restates_call('{"name": "fs_list_dir", "arguments": {"path": "myfolder.txt"}}', listed)
    assert restates_call('({"name": "fs_list_dir", "arguments": {"path": "myfolder.txt"}}', listed)
    assert restates_call('{"name": "pdf_extract_text", "arguments": {"path": "notes/todo.txt"}}', read)
    assert not restates_call('{"name": "fs_list_dir", "note": "a setting"}', listed)  # JSON, not a call


def test_the_results_are_shown_when_the_answer_only_repeats_the_call(jarvis_env):
    (jarvis_env.root / "notes.txt").write_text("Buy bread.")
    jarvis_env.server.push(tool_call("fs_list_dir", path=str(jarvis_env.root)),
                           answer(f'{{"path": "{jarvis_env.root}"}}\n```'))
    proc = jarvis_env.cli("chat", "--thread", "echo", "list my folder")
    assert proc.returncode == 0, proc.stderr
    assert "(The model repeated its call instead of answering; here is what came back.)" in proc.stdout
    assert "fs_list_dir returned:" in proc.stdout and "notes.txt" in proc.stdout
    kept = jarvis_env.graph().get_state({"configurable": {"thread_id": "echo"}}).values["messages"]
    assert kept[-1].type == "ai" and "notes.txt" in kept[-1].content  # the thread keeps the results, not the echo
    assert sum(m.type == "ai" for m in kept) == 2  # replaced, not added after

    # an ordinary answer stays as the model wrote it
    jarvis_env.server.push(tool_call("fs_list_dir", path=str(jarvis_env.root)), answer("You have notes.txt."))
    proc = jarvis_env.cli("chat", "--thread", "plain", "list my folder")
    assert proc.stdout.strip() == "You have notes.txt."


def test_the_cli_shows_a_note_added_after_the_streamed_words(jarvis_env):
    jarvis_env.server.push({"content": "Here are the ten steps: one, two", "finish_reason": "length"})
    proc = jarvis_env.cli("chat", "--thread", "cut", "ten steps?")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Here are the ten steps") == 1
    assert "cut off at the model's token limit" in proc.stdout
