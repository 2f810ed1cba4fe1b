"""`jarvis runs` counts what the turn did as the live view and the history show it: a call refused before it ran
(an unknown tool, bad arguments, a denial) is a tool step of the run, not run."""

from __future__ import annotations

from orchestrator.storage import writer
from orchestrator.storage.telemetry import list_runs
from orchestrator.chat.turns import stream_turn, user_input
from tests.conftest import answer, tool_call


def test_refused_calls_are_counted_in_the_run(jarvis_env):
    (jarvis_env.root / "a.txt").write_text("x")
    jarvis_env.server.push(tool_call("no_such_tool", path="/"), tool_call("fs_list_dir", path=123456),
                           tool_call("fs_list_dir", path=str(jarvis_env.root)), answer("One file: a.txt."))
    events = list(stream_turn(jarvis_env.graph(), "counted", user_input("list my folder")))
    assert events[-1]["event"] == "done"
    shown = [e for e in events if e["event"] == "tool_end"]
    assert [e["ok"] for e in shown] == [False, False, True]
    writer.flush()
    (run,) = list_runs(jarvis_env.settings, limit=5, thread_id="counted")
    assert (run.tool_calls, run.tool_errors) == (3, 2), run
