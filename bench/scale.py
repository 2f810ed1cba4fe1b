"""Scale: planner prompt tokens and turn time with 10, 100 and 1,000 registered tools (targets: tokens flat past
12 tools; turn time at 1,000 <= 1.1x at 10, [25]; it was 1.2x), and database bytes per turn at turn 10 and at turn 1,000 of one
thread (target <= 1.5x). Zero-latency in-process model; SQLite, and PostgreSQL too where its server is installed
(the bytes per turn again, with the Postgres saver's blobs)."""

from __future__ import annotations

import json
import sqlite3
import statistics
import time

from _common import isolated_settings

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from orchestrator.chat.planner import openai_schema
from orchestrator.storage import writer
from orchestrator.app import App
from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from orchestrator.app import build_graph
from tests.fakes.instant_chat import InstantChatModel
from tests.retrieval_catalog import build_catalog

TURNS = 40


class Recording(InstantChatModel):
    """Calls time_now, then answers; records the prompt tokens (messages + bound tool schemas) of each call."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        bound = Recording(responder=self.responder)
        bound.seen = self.seen
        object.__setattr__(bound, "_tools", [openai_schema(t) for t in tools])  # as the planner sends them
        return bound

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        tools = getattr(self, "_tools", [])
        self.seen.append(count_tokens_approximately(messages) + len(json.dumps(tools)) // 4)
        return super()._generate(messages, stop, run_manager, **kwargs)


def respond(messages):
    last = messages[-1]
    if messages[0].content.startswith("You keep the memory"):
        return AIMessage(content="The user chatted about numbers.")
    if isinstance(last, ToolMessage):
        return AIMessage(content="It is now.")
    return AIMessage(content="", tool_calls=[{"name": "time_now", "args": {}, "id": f"c{time.perf_counter_ns()}",
                                              "type": "tool_call"}])


def tools_case(count: int) -> tuple[float, float]:
    settings, _ = isolated_settings()
    model = Recording(responder=respond)
    model.seen = []
    catalog = ToolCatalog([StaticProvider("bench", build_catalog(App(settings).static_tools(), count))])
    graph = build_graph(settings, llm=model, catalog=catalog)
    times = []
    for i in range(TURNS + 3):
        t0 = time.perf_counter()
        graph.invoke({"messages": [("user", f"what time is it? ({i})")]}, {"configurable": {"thread_id": f"t{i}"}})
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(model.seen), statistics.median(times)


def logical_bytes(settings) -> int:
    total = 0
    for name, queries in (("checkpoints", ["SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints",
                                           "SELECT SUM(LENGTH(value)) FROM writes"]),
                          ("jarvis", ["SELECT SUM(LENGTH(data)) FROM message_archive"])):
        conn = sqlite3.connect(settings.data_path(f"{name}.sqlite"))
        for q in queries:
            total += conn.execute(q).fetchone()[0] or 0
        conn.close()
    return total


def postgres_bytes(settings) -> int:
    import psycopg

    with psycopg.connect(settings.storage.url) as conn:
        return int(conn.execute(
            "SELECT (SELECT COALESCE(SUM(pg_column_size(checkpoint) + pg_column_size(metadata)), 0) FROM checkpoints)"
            " + (SELECT COALESCE(SUM(pg_column_size(blob)), 0) FROM checkpoint_blobs)"
            " + (SELECT COALESCE(SUM(pg_column_size(blob)), 0) FROM checkpoint_writes)"
            " + (SELECT COALESCE(SUM(LENGTH(data)), 0) FROM message_archive)").fetchone()[0])


def bytes_per_turn(storage: dict | None = None, measure=logical_bytes) -> tuple[float, float]:
    settings, _ = isolated_settings(planner={"history_token_budget": 1500}, **({"storage": storage} if storage else {}))

    def answer_only(messages):
        if messages[0].content.startswith("You keep the memory"):
            return AIMessage(content="The user chatted about numbers.")
        return AIMessage(content=f"Noted: {messages[-1].content}")

    graph = build_graph(settings, llm=InstantChatModel(responder=answer_only))
    sizes = {}
    for turn in range(1, 1001):
        graph.invoke({"messages": [("user", f"turn {turn}: a sentence about the number {turn}")]},
                     {"configurable": {"thread_id": "long"}})
        if turn in (10, 60, 950, 1000):
            writer.flush()
            sizes[turn] = measure(settings)
    return (sizes[60] - sizes[10]) / 50, (sizes[1000] - sizes[950]) / 50


def main() -> None:
    print("[scale]")
    results = {n: tools_case(n) for n in (10, 100, 1000)}
    for n, (tokens, ms) in results.items():
        print(f"  {n:>5} tools: planner prompt tokens (median) {tokens:.0f}, turn time (median) {ms:.1f} ms")
    tok_ratio = results[1000][0] / results[100][0]
    time_ratio = results[1000][1] / results[10][1]
    print(f"  prompt tokens 1,000 / 100 tools: {tok_ratio:.3f} (target: flat past 12 tools) -> {'OK' if tok_ratio <= 1.1 else 'MISSED'}")
    print(f"  turn time 1,000 / 10 tools: {time_ratio:.3f} (target <= 1.1) -> {'OK' if time_ratio <= 1.1 else 'MISSED'}")
    early, late = bytes_per_turn()
    ratio = late / early
    print(f"  database bytes per turn: {early:.0f} at turn 10, {late:.0f} at turn 1,000; ratio {ratio:.3f} "
          f"(target <= 1.5) -> {'OK' if ratio <= 1.5 else 'MISSED'}")
    postgres_case()


def postgres_case() -> None:
    from tests.pg_server import postgres_session

    try:
        sessions = postgres_session()
        server = next(sessions)
    except BaseException as exc:  # pytest's skip outside pytest: no PostgreSQL here
        print(f"  PostgreSQL: not measured ({exc})")
        return
    try:
        early, late = bytes_per_turn({"url": server.new_database()}, postgres_bytes)
        ratio = late / early
        print(f"  PostgreSQL bytes per turn: {early:.0f} at turn 10, {late:.0f} at turn 1,000; ratio {ratio:.3f} "
              f"(target <= 1.5) -> {'OK' if ratio <= 1.5 else 'MISSED'}")
    finally:
        from orchestrator.storage import engines as storage

        storage.dispose_all()
        sessions.close()


if __name__ == "__main__":
    main()
