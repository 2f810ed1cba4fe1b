"""Latency from `Command(resume=approve)` to the tool's result being stored in the checkpoint, against a turn
running the same side-effecting tool at `auto` (from the user's message to the stored result).
SQLite checkpointer, zero-latency in-process model. Target: ratio <= 1.3."""

from __future__ import annotations

import time

from _common import isolated_settings, report

from langgraph.types import Command

from orchestrator.app import build_graph
from tests.fakes.instant_chat import InstantChatModel

RUNS = 40


def until_tool_stored(graph, graph_input, config) -> float:
    """ms from the call until the tool_node update has been written (stream yields it after the checkpoint)."""
    t0 = time.perf_counter()
    elapsed = None
    for update in graph.stream(graph_input, config, stream_mode="updates"):
        if "tool_node" in update and elapsed is None:
            elapsed = (time.perf_counter() - t0) * 1000
    assert elapsed is not None, "the tool never ran"
    return elapsed


def main() -> None:
    import statistics

    confirm_settings, root = isolated_settings(autonomy={"effects": {"fs_write": "confirm"}})
    auto_settings, _ = isolated_settings(autonomy={"effects": {"fs_write": "auto"}})
    auto_settings.fs.roots = confirm_settings.fs.roots
    path = str(confirm_settings.fs.roots[0] / "out.txt")
    model = InstantChatModel(tool_name="fs_write_text", tool_args={"path": path, "content": "hello"})
    confirm_graph = build_graph(confirm_settings, llm=model)
    auto_graph = build_graph(auto_settings, llm=model)

    resume_ms, auto_ms = [], []
    for i in range(RUNS + 3):
        cfg = {"configurable": {"thread_id": f"c{i}"}}
        out = confirm_graph.invoke({"messages": [("user", "write")]}, cfg, version="v2")
        (intr,) = out.interrupts
        r = until_tool_stored(confirm_graph, Command(resume={intr.id: {"decision": "approve"}}), cfg)
        a = until_tool_stored(auto_graph, {"messages": [("user", "write")]}, {"configurable": {"thread_id": f"a{i}"}})
        if i >= 3:
            resume_ms.append(r)
            auto_ms.append(a)
    r, a = statistics.median(resume_ms), statistics.median(auto_ms)
    ratio = r / a
    report("confirm_roundtrip", {"resume(approve) -> result stored, ms": r, "auto turn -> result stored, ms": a},
           ratio, "<= 1.3", ratio <= 1.3)


if __name__ == "__main__":
    main()
