"""An approval is bound to the call the user saw ([16] finding 1).

Work that re-runs up to its question (a jorb script, a mission round: LangGraph re-runs the node on resume) may
make a different call at the same point, on a branch that depends on the clock or on what it read. The answer
given to the first call must not approve the second: it is asked about, with what changed. These tests drive a
real LangGraph graph with a checkpointer, whose node calls the executor with `interrupt` as the confirmation,
as the jorb and mission graphs do.
"""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from integrations.fs_tools import build_fs_tools
from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from orchestrator.core.config import settings_from_dict
from orchestrator.tools.executor import CallContext, ToolExecutor


class State(TypedDict, total=False):
    result: str


def _setup(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}, "fs": {"roots": [str(root)]},
                                   "autonomy": {"default": "confirm"}}, tmp_path)
    executor = ToolExecutor(settings, ToolCatalog([StaticProvider("fs", build_fs_tools([root]))]))
    return root, executor


def _graph(executor: ToolExecutor, choose_target, key: str):
    """One node: a script-like step whose call depends on `choose_target()` at the moment it runs."""

    def step(state: State) -> dict[str, Any]:
        target = choose_target()
        outcome = executor.execute("fs_write_text", {"path": str(target), "content": "written"},
                                   CallContext(thread_id="swap", key=key, origin="jorb"),
                                   lambda request: interrupt(request.payload()))
        return {"result": outcome.content}

    return _one_node(step)


def _one_node(step) -> Any:
    """A graph of one node `step`, with a checkpointer: resumed, it re-runs `step` from its start."""
    builder = StateGraph(State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=InMemorySaver())


def _pending(graph, config) -> list[dict]:
    return [i.value for i in graph.get_state(config).interrupts]


def test_an_approval_given_for_one_call_does_not_run_another(tmp_path):
    root, executor = _setup(tmp_path)
    notes, bashrc = root / "notes.txt", root / ".bashrc"
    bashrc.write_text("# the user's shell\n")
    clock = {"target": notes}
    graph = _graph(executor, lambda: clock["target"], key=f"swap|{uuid.uuid4().hex}")
    config = {"configurable": {"thread_id": "swap"}}

    graph.invoke({}, config)
    (shown,) = _pending(graph, config)
    assert shown["args"]["path"] == str(notes)

    clock["target"] = bashrc  # between the question and the re-run, the branch flips
    graph.invoke(Command(resume="approve"), config)
    assert bashrc.read_text() == "# the user's shell\n" and not notes.exists()
    (asked_again,) = _pending(graph, config)
    assert asked_again["args"]["path"] == str(bashrc)
    assert "the answer given was for another call" in asked_again["error"] and "notes.txt" in asked_again["error"]

    graph.invoke(Command(resume="approve"), config)  # now approving what is shown: that call runs
    assert bashrc.read_text() == "written" and not notes.exists()
    assert _pending(graph, config) == []


def test_the_same_call_asked_again_after_a_rerun_keeps_its_approval(tmp_path):
    root, executor = _setup(tmp_path)
    target = root / "notes.txt"
    graph = _graph(executor, lambda: target, key=f"same|{uuid.uuid4().hex}")
    config = {"configurable": {"thread_id": "same"}}
    graph.invoke({}, config)
    assert len(_pending(graph, config)) == 1
    graph.invoke(Command(resume="approve"), config)
    assert target.read_text() == "written" and _pending(graph, config) == []


def test_an_edit_given_for_one_call_does_not_apply_to_another(tmp_path):
    root, executor = _setup(tmp_path)
    first, second = root / "a.txt", root / "b.txt"
    clock = {"target": first}
    graph = _graph(executor, lambda: clock["target"], key=f"edit|{uuid.uuid4().hex}")
    config = {"configurable": {"thread_id": "edit"}}
    graph.invoke({}, config)
    clock["target"] = second
    graph.invoke(Command(resume={"decision": "edit", "args": {"path": str(first), "content": "edited"}}), config)
    assert not first.exists() and not second.exists()
    (asked_again,) = _pending(graph, config)
    assert asked_again["args"]["path"] == str(second) and "another call" in asked_again["error"]


def test_a_rerun_that_makes_another_call_where_one_was_recorded_is_stopped(tmp_path):
    """A completed call is replayed by its key; if the re-run now makes a different call there, the recorded
    result must not stand for it (and nothing runs unasked): the call fails, saying what was recorded."""
    root, executor = _setup(tmp_path)
    notes, bashrc, report = root / "notes.txt", root / ".bashrc", root / "report.txt"
    bashrc.write_text("# the user's shell\n")
    clock = {"target": notes}
    seen: list[str] = []

    def step(state: State) -> dict[str, Any]:
        first = executor.execute("fs_write_text", {"path": str(clock["target"]), "content": "written"},
                                 CallContext(thread_id="re", key="re|call1", overrides={"fs_write": "auto"}),
                                 lambda request: interrupt(request.payload()))
        seen.append(first.content)
        executor.execute("fs_write_text", {"path": str(report), "content": "r"}, CallContext(thread_id="re", key="re|call2"),
                         lambda request: interrupt(request.payload()))
        return {"result": first.content}

    graph = _one_node(step)
    config = {"configurable": {"thread_id": "re"}}
    graph.invoke({}, config)  # call1 runs (auto), call2 asks
    assert notes.read_text() == "written" and seen[0].startswith("Wrote")
    clock["target"] = bashrc
    graph.invoke(Command(resume="approve"), config)  # the node re-runs: call1 is now another call
    assert bashrc.read_text() == "# the user's shell\n"
    assert seen[1].startswith("Not done: at this point the work made another call before") and "notes.txt" in seen[1]


def test_an_edited_call_replays_as_itself(tmp_path):
    """The recorded arguments of an edited call differ from the call as made: a re-run is still a replay."""
    root, executor = _setup(tmp_path)
    asked, edited = root / "asked.txt", root / "edited.txt"
    runs: list[str] = []

    def step(state: State) -> dict[str, Any]:
        out = executor.execute("fs_write_text", {"path": str(asked), "content": "x"},
                               CallContext(thread_id="ed", key="ed|call1"), lambda request: interrupt(request.payload()))
        runs.append(out.content)
        executor.execute("fs_write_text", {"path": str(root / "later.txt"), "content": "y"},
                         CallContext(thread_id="ed", key="ed|call2"), lambda request: interrupt(request.payload()))
        return {"result": out.content}

    graph = _one_node(step)
    config = {"configurable": {"thread_id": "ed"}}
    graph.invoke({}, config)
    graph.invoke(Command(resume={"decision": "edit", "args": {"path": str(edited), "content": "x"}}), config)
    graph.invoke(Command(resume="approve"), config)
    assert edited.read_text() == "x" and not asked.exists()
    assert runs[-1].startswith("Wrote") and "edited.txt" in runs[-1]  # replayed, not refused
