"""Parked jorbs at scale: with 100 and with 10,000 jorbs waiting for replies in SQLite, the median latency from
an inbound message to the jorb's next script starting (zero-latency in-process model).
Targets: <= 50 ms, and 10,000 no more than 1.5x of 100."""

from __future__ import annotations

import json
import statistics
import sys
import time

from _common import isolated_settings

from langchain_core.messages import AIMessage

from orchestrator.channels.inbound import InboundMessage
from orchestrator.app import App
from orchestrator.jorbs.service import JorbService
from orchestrator.jorbs.script_runner import spawn_unsandboxed
from tests.fakes.instant_chat import InstantChatModel

SAMPLES = 30


def respond(messages) -> AIMessage:
    event = messages[-1].content
    if '"type": "reply"' in event:
        step = {"reasoning": "answer", "script": "jarvis.time.now()", "await_reply": True}
    else:
        step = {"reasoning": "wait for the counterpart", "await_reply": True}
    return AIMessage(content=json.dumps(step))


def measure(count: int) -> tuple[float, float]:
    settings, _ = isolated_settings()
    spawned: list[float] = []

    def spawn(argv):
        spawned.append(time.perf_counter())
        return spawn_unsandboxed(argv)

    svc = JorbService(settings, catalog=App(settings).catalog, llm=InstantChatModel(responder=respond), spawn=spawn)
    t0 = time.perf_counter()
    for i in range(count):
        svc.create(f"jorb {i}", "wait for a reply, then check the time", contacts=[f"+1 415 555 {i:04d}"])
        if i and i % 1000 == 0:
            print(f"  ... {i} jorbs parked", file=sys.stderr, flush=True)
    create_ms = (time.perf_counter() - t0) * 1000 / count
    latencies = []
    step = max(1, count // SAMPLES)
    for i in range(0, count, step)[:SAMPLES]:
        spawned.clear()
        start = time.perf_counter()
        route = svc.inbound(InboundMessage("local", f"(415) 555-{i:04d}", "here is my answer"))
        assert route.jorb_id and spawned, route
        latencies.append((spawned[0] - start) * 1000)
    return statistics.median(latencies), create_ms


def main() -> None:
    small, c_small = measure(100)
    large, c_large = measure(10_000)
    ratio = large / small
    print("[jorbs]")
    print(f"  100 parked: inbound -> next script starts, median ms: {small:.2f}  (creating one: {c_small:.1f} ms)")
    print(f"  10,000 parked: inbound -> next script starts, median ms: {large:.2f}  (creating one: {c_large:.1f} ms)")
    print(f"  target <= 50 ms: {'OK' if large <= 50 and small <= 50 else 'MISSED'}")
    print(f"  ratio 10,000 / 100: {ratio:.3f} (target <= 1.5) -> {'OK' if ratio <= 1.5 else 'MISSED'}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(measure(int(sys.argv[1])))
    else:
        main()
