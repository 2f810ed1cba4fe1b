"""Routing an exactly matched inbound message with 1,000 open jorbs: the indexed contact lookup, no model call.
Target: <= 5 ms."""

from __future__ import annotations

import statistics
import time

from _common import isolated_settings

from orchestrator.channels.inbound import InboundMessage
from orchestrator.jorbs.router import route_inbound
from orchestrator.jorbs.store import JorbStore

JORBS = 1000
SAMPLES = 300


class _NoModel:
    def invoke(self, *args, **kwargs):
        raise AssertionError("an exact match must not call the model")


class _Service:
    """What route_inbound needs: settings, the store, and a model it must not use."""

    def __init__(self, settings):
        self.settings = settings
        self.store = JorbStore(settings)
        self.rt = type("rt", (), {"llm": _NoModel()})()


def main() -> None:
    settings, _ = isolated_settings()
    svc = _Service(settings)
    for i in range(JORBS):
        svc.store.create(name=f"jorb {i}", plan="talk to someone", contacts=[f"+1 415 555 {i:04d}", f"p{i}@example.com"])
    for row in svc.store.list(limit=JORBS):
        svc.store.update(row.id, status="awaiting_reply")
    times = []
    for k in range(SAMPLES):
        i = (k * 37) % JORBS
        t0 = time.perf_counter()
        route = route_inbound(svc.settings, svc.store, svc.rt.llm, InboundMessage("sms", f"(415) 555-{i:04d}", "hello"))
        times.append((time.perf_counter() - t0) * 1000)
        assert route.status == "routed", route
    median = statistics.median(times)
    print("[switchboard]")
    print(f"  open jorbs: {JORBS}; exact-match routing median ms: {median:.3f} (p95 {sorted(times)[int(SAMPLES * .95)]:.3f})")
    print(f"  ratio to the 5 ms target: {median / 5:.3f} -> {'OK' if median <= 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
