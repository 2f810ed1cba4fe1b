"""Scheduler tick cost with 10,000 pending reminders (issue [9]).

Prints the median cost of an idle tick (target <= 5 ms: an indexed lookup, not a scan) and of a tick that
fires 100 reminders: the tick itself (claim + hand-off), and until all 100 are settled, both into an in-process
target (jorb waker: the scheduler's own overhead) and into a real agent process over STDIO JSON-RPC.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import textwrap
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import insert  # noqa: E402

from orchestrator.core.config import settings_from_dict  # noqa: E402
from orchestrator.reminders import ReminderStore  # noqa: E402
from orchestrator.reminders.scheduler import Scheduler  # noqa: E402
from orchestrator.reminders.models import ReminderRow, new_reminder_id, utcnow  # noqa: E402
from orchestrator.storage.engines import dispose_all  # noqa: E402

PENDING_ROWS = 10_000
IDLE_TARGET_MS = 5.0

ACK_AGENT = textwrap.dedent(f"""\
    #!{sys.executable}
    import sys
    for line in sys.stdin:
        sys.stdout.write('{{"jsonrpc": "2.0", "result": "ok", "id": null}}\\n')
        sys.stdout.flush()
    """)


def rows(n: int, due, **target) -> list[dict]:
    out = []
    for i in range(n):
        rid = new_reminder_id()
        out.append(dict(id=rid, series_id=rid, title=f"bench {i}", description=None, due_date=due, fire_at=due,
                        priority="medium", status="pending", attempts=0, missed_policy="catch_up",
                        created_at=utcnow(), updated_at=utcnow(), created_by="bench", **target))
    return out


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="jarvis-bench-scheduler-"))
    agent = tmp / "ack_agent.py"
    agent.write_text(ACK_AGENT)
    agent.chmod(0o755)
    settings = settings_from_dict({"storage": {"data_dir": str(tmp / "data")}, "sandbox": {"required": False},
                                   "scheduler": {"batch_size": 500, "workers": 4}}, tmp)
    store = ReminderStore(settings)
    far = utcnow() + timedelta(days=365)
    with store.engine.begin() as conn:
        conn.execute(insert(ReminderRow), rows(PENDING_ROWS, far, jorb_id="bench"))
    sched = Scheduler(settings, store=store, wake_jorb=lambda jorb_id, event: None)

    for _ in range(20):  # warm up connections and statement caches
        sched.tick()
    idle = []
    for _ in range(300):
        t0 = time.perf_counter()
        report = sched.tick()
        idle.append((time.perf_counter() - t0) * 1000)
        assert report.claimed == 0
    idle_ms = statistics.median(idle)

    def fire_round(target: dict) -> tuple[float, float]:
        due = utcnow() - timedelta(seconds=1)
        with store.engine.begin() as conn:
            conn.execute(insert(ReminderRow), rows(100, due, **target))
        t0 = time.perf_counter()
        report = sched.tick()
        tick_ms = (time.perf_counter() - t0) * 1000
        assert report.dispatched == 100, report
        assert sched.wait_idle(60)
        done_ms = (time.perf_counter() - t0) * 1000
        return tick_ms, done_ms

    jorb = [fire_round({"jorb_id": "bench"}) for _ in range(5)]
    agent_rounds = [fire_round({"process_name": str(agent)}) for _ in range(5)]
    sent = len(store.list(status="sent"))
    sched.stop()
    dispose_all()
    assert sent == 1000, f"{sent} of 1000 fired reminders were sent"

    med = lambda xs: statistics.median(xs)  # noqa: E731
    print(f"pending reminders: {PENDING_ROWS}")
    print(f"idle tick: median {idle_ms:.3f} ms over {len(idle)} ticks "
          f"(target <= {IDLE_TARGET_MS:g} ms; ratio {idle_ms / IDLE_TARGET_MS:.3f} of target)")
    print(f"tick firing 100 (claim + hand-off): median {med([t for t, _ in jorb]):.1f} ms")
    print(f"  until all 100 settled, in-process target: median {med([d for _, d in jorb]):.1f} ms")
    print(f"  until all 100 settled, agent process over STDIO: median {med([d for _, d in agent_rounds]):.1f} ms "
          f"(tick {med([t for t, _ in agent_rounds]):.1f} ms)")


if __name__ == "__main__":
    main()
