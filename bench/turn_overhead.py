"""One planner -> tool -> planner -> respond turn through Jarvis's graph, against a bare LangGraph graph doing the
same turn with the same model, tool and SQLite checkpointer. Prints the median ms per turn and the ratio.
Target: ratio <= 1.2 ([25]; it was 1.5).

Both sides are measured alike: the bare graph's SQLite connection gets Jarvis's settings (WAL, synchronous=NORMAL;
with SQLite's defaults it waited for an fsync per checkpoint, 4 to 12 ms a turn on a busy disk, and the ratio
measured the disk), and Jarvis's bookkeeping writes, done on its writer thread after a turn, are counted in its
turn (flushed before the clock stops; else they landed in the next bare turn). Each graph keeps its own default
durability: LangGraph's is "async" (a step's checkpoint is written while the next step runs), Jarvis's chat graph
"sync" (written before the next step starts: chat/graph.py says why).

200 turns each: with 60, two runs of the same code differed by 0.07 in the ratio."""

from __future__ import annotations

import sqlite3

from _common import interleaved_medians, isolated_settings, report

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from orchestrator.app import App
from orchestrator.app import build_graph
from orchestrator.storage import writer
from orchestrator.storage.engines import tune_sqlite
from tests.fakes.instant_chat import InstantChatModel

RUNS = 200


def bare_graph(model, tools, path):
    def agent(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    def respond(state: MessagesState):
        return {}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_node("respond", respond)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: "respond"})
    g.add_edge("tools", "agent")
    g.add_edge("respond", END)
    conn = sqlite3.connect(str(path), check_same_thread=False)
    tune_sqlite(conn)  # the same journal and sync settings as Jarvis's checkpointer: else the ratio measures fsync
    saver = SqliteSaver(conn)
    saver.setup()
    return g.compile(checkpointer=saver)


def main() -> None:
    settings, base = isolated_settings()
    model = InstantChatModel(tool_name="time_now")
    jarvis = build_graph(settings, llm=model)
    tools = [t for t in App(settings).static_tools() if t.name == "time_now"]
    bare = bare_graph(model, tools, base / "bare.sqlite")

    def turn(graph, prefix, background=lambda: None):
        def run(i: int):
            out = graph.invoke({"messages": [("user", "what time is it?")]}, {"configurable": {"thread_id": f"{prefix}{i}"}})
            assert out["messages"][-1].content == "Done.", out["messages"][-1]
            background()
        return run

    # Interleaved, so that load from elsewhere on the machine hits both alike.
    bare_ms, jarvis_ms = interleaved_medians(turn(bare, "b"), turn(jarvis, "j", writer.flush), RUNS)
    ratio = jarvis_ms / bare_ms
    report("turn_overhead", {"bare LangGraph ms/turn": bare_ms, "Jarvis ms/turn": jarvis_ms}, ratio, "<= 1.2", ratio <= 1.2)


if __name__ == "__main__":
    main()
