"""The scheduler loop: every `scheduler.tick_s`, take the due reminders and fire them into their targets.

    scheduler = App(settings).scheduler()   # fires into the App's chat graph and jorbs (orchestrator/app.py)
    scheduler.start()                       # a daemon thread; returns at once
    ...
    scheduler.stop()                               # stops agents, waits briefly for deliveries in flight

A tick that finds nothing due is one indexed query. Due reminders are claimed atomically (see
ReminderStore.claim_due) and delivered by a few worker threads, so a hanging webhook or a slow agent never
holds up the others or the next tick. Delivery is at least once: a claim cut off by a crash is retried when its
lease ends.

Missed reminders (the scheduler was not running at their time, by more than `missed_grace_s`) follow their
policy: `catch_up` fires them once, `skip` marks them skipped, `ask` marks them missed and tells the user in the
chat (`jarvis reminders fire ID` or `cancel ID`). A recurring reminder has one pending occurrence at a time and
its next one is computed after now, so downtime over many occurrences still gives one catch-up, not a burst.

Jarvis's other work on a schedule (`jobs`: the scheduled backup, orchestrator/backup/schedule.py) is looked at on
the same loop: each job is started on a thread of its own at the first tick and then every `JOB_PERIOD_S` (not
while its last run is still going), and decides itself whether it is due; a long backup never holds up a reminder.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from orchestrator.core.config import Settings
from .agents import AgentManager, AgentTarget
from .models import Reminder, utcnow
from .recurrence import backoff_seconds, describe
from .store import ReminderStore
from .targets import ChatTarget, DeliveryDeferred, DeliveryError, JorbTarget, JorbWaker, ReminderTarget, reminder_text
from .webhook import WebhookTarget

log = logging.getLogger(__name__)


JOB_PERIOD_S = 60.0
_Queue = queue.Queue  # items: (reminder, tick time, tick monotonic, ask) or None to stop a worker


@dataclass
class TickReport:
    claimed: int = 0
    dispatched: int = 0
    skipped: int = 0
    missed: int = 0


class Scheduler:
    def __init__(self, settings: Settings, *, graph: Any = None, graph_factory: Callable[[], Any] | None = None,
                 wake_jorb: JorbWaker | None = None, store: ReminderStore | None = None,
                 targets: dict[str, ReminderTarget] | None = None,
                 jobs: dict[str, Callable[[], Any]] | None = None):
        """`graph` (or `graph_factory`, asked on the first reminder into a chat thread): the chat graph;
        `wake_jorb(jorb_id, event)`: delivers a reminder to a jorb. Without them those reminders wait.
        `jobs`: name -> work started at each tick (it returns at once when not due)."""
        self.settings = settings
        self.jobs = dict(jobs or {})
        self._job_threads: dict[str, threading.Thread] = {}
        self._jobs_started_at: float | None = None
        self.cfg = settings.scheduler
        self.store = store or ReminderStore(settings)
        self._graph = graph
        self._graph_factory = graph_factory
        self._graph_lock = threading.Lock()
        self.agents = AgentManager(self.store, ack_timeout_s=self.cfg.ack_timeout_s,
                                   max_creates_per_hour=self.cfg.max_creates_per_hour, on_created=self._created,
                                   may_target=self.cfg.agents_may_target)
        self.webhooks = WebhookTarget(self.cfg.webhook_timeout_s, self.cfg.webhook_tries)
        self.chat = ChatTarget(self._chat_graph, self.describe, self.cfg.chat_thread)
        self.targets: dict[str, ReminderTarget] = {
            "agent": AgentTarget(self.agents), "webhook": self.webhooks, "chat": self.chat, "jorb": JorbTarget(wake_jorb),
            **(targets or {}),
        }
        self._queue: _Queue = queue.Queue()
        self._workers: list[threading.Thread] = []
        # One lane (queue + thread) per agent: its fires are serial anyway (ACKs carry no id), and a hung agent
        # then holds up only its own reminders, not the shared workers.
        self._lanes: dict[str, _Queue] = {}
        self._inflight = 0
        self._inflight_ids: set[str] = set()
        self._idle = threading.Condition()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._loop_thread: threading.Thread | None = None
        self.stopping = False
        self.last_tick_at: datetime | None = None
        self.last_error: tuple[datetime, str] | None = None

    # The chat graph is built on first use: `jarvis scheduler` needs it only for reminders into a thread.
    def _chat_graph(self) -> Any:
        with self._graph_lock:
            if self._graph is None:
                if self._graph_factory is None:
                    raise DeliveryDeferred("this scheduler was started without the chat; `jarvis run` delivers it")
                self._graph = self._graph_factory()
            return self._graph

    def describe(self, value: datetime) -> str:
        return describe(value, self.store.zone)

    def _created(self, reminder: Reminder) -> None:
        if reminder.fire_at <= utcnow():
            self.wake()

    def wake(self) -> None:
        """Run a tick now (a reminder due at once was created in this process)."""
        self._wake.set()

    # Running ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self.stopping:
            raise RuntimeError("this Scheduler was stopped; make a new one to start again")
        if self._loop_thread is not None:
            return
        self._stop.clear()
        self._ensure_workers()
        self._loop_thread = threading.Thread(target=self._loop, name="jarvis-scheduler", daemon=True)
        self._loop_thread.start()
        log.info("scheduler started (tick %g s)", self.cfg.tick_s)

    def run(self, duration_s: float | None = None, stop_event: threading.Event | None = None) -> None:
        """Run in the foreground until `duration_s` passed or `stop_event` is set, then stop cleanly."""
        self.start()
        deadline = None if duration_s is None else time.monotonic() + duration_s
        stop_event = stop_event or threading.Event()
        try:
            while not stop_event.is_set():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                stop_event.wait(0.5 if remaining is None else min(0.5, remaining))
        finally:
            self.stop()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop and the agents; wait up to timeout_s for deliveries in flight (the rest is retried)."""
        self.stopping = True
        self._stop.set()
        self._wake.set()
        if self._loop_thread is not None:
            self._loop_thread.join(timeout=timeout_s)
            self._loop_thread = None
        self.agents.stop_all()
        self.wait_idle(timeout_s)
        for _ in self._workers:
            self._queue.put(None)
        for lane in self._lanes.values():
            lane.put(None)
        self._workers, self._lanes = [], {}
        self.webhooks.close()
        log.info("scheduler stopped")

    def _loop(self) -> None:
        while not self._stop.is_set():
            full = False
            try:
                report = self.tick()
                full = report.claimed >= self.cfg.batch_size
                self.last_tick_at = utcnow()  # the health report and jarvis doctor show it
            except Exception as exc:  # noqa: BLE001 - a locked database or a bad row must not end the loop
                self.last_error = (utcnow(), f"{type(exc).__name__}: {exc}")
                log.exception("scheduler tick failed; trying again at the next tick")
            self._start_jobs()
            if not full:
                self._wake.wait(self.cfg.tick_s)
            self._wake.clear()

    def _start_jobs(self) -> None:
        if self._jobs_started_at is not None and time.monotonic() - self._jobs_started_at < JOB_PERIOD_S:
            return
        self._jobs_started_at = time.monotonic()
        for name, job in self.jobs.items():
            running = self._job_threads.get(name)
            if running is not None and running.is_alive():
                continue
            thread = threading.Thread(target=self._run_job, args=(name, job), name=f"jarvis-job-{name}", daemon=True)
            self._job_threads[name] = thread
            thread.start()

    @staticmethod
    def _run_job(name: str, job: Callable[[], Any]) -> None:
        try:
            job()
        except Exception:  # noqa: BLE001 - the job records its own outcome; the next tick tries again
            log.exception("scheduled job %s failed", name)

    def _ensure_workers(self) -> None:
        while len(self._workers) < self.cfg.workers:
            t = threading.Thread(target=self._work, args=(self._queue,), name=f"jarvis-reminders-{len(self._workers)}",
                                 daemon=True)
            self._workers.append(t)
            t.start()

    def _lane(self, command: str) -> _Queue:
        lane = self._lanes.get(command)
        if lane is None:
            lane = self._lanes[command] = queue.Queue()
            threading.Thread(target=self._work, args=(lane,), name=f"jarvis-agent-lane-{len(self._lanes)}",
                             daemon=True).start()
        return lane

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until no delivery is queued or running (tests, benchmarks, shutdown)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._inflight == 0, timeout=timeout_s)

    # One tick ---------------------------------------------------------------------------------------------
    def tick(self, now: datetime | None = None) -> TickReport:
        """Claim what is due at `now` (default: the clock) and hand it to the workers."""
        now = now or utcnow()
        report = TickReport()
        if not self.store.any_due(now):
            return report
        lease_until = now + timedelta(seconds=self.cfg.lease_s)
        claimed = self.store.claim_due(now, lease_until, self.cfg.batch_size, self.cfg.missed_grace_s)
        report.claimed = len(claimed)
        self._ensure_workers()
        mono = time.monotonic()
        for r in claimed:
            if r.missed_at == now and r.missed_policy != "catch_up":
                reason = f"missed: due {self.describe(r.due_date)} while the scheduler was not running"
                if r.missed_policy == "skip":
                    self.store.mark_skipped(r, reason + " (policy skip)", now)
                    report.skipped += 1
                    log.info("reminder %s %r skipped: %s", r.id, r.title, reason)
                    continue
                self.store.mark_missed(r, reason + " (policy ask: fire or cancel it)", now)
                report.missed += 1
                self._submit(r, now, mono, ask=True)
                continue
            if r.missed_at == now:
                log.info("reminder %s %r was missed (due %s); catching up once", r.id, r.title, r.due_date)
            self._submit(r, now, mono)
            report.dispatched += 1
        return report

    def _submit(self, r: Reminder, now: datetime, mono: float, ask: bool = False) -> None:
        with self._idle:
            if r.id in self._inflight_ids:
                # Its lease ran out while it still waits here (a very slow target); the queued delivery settles it.
                log.warning("reminder %s is still being delivered; its lease was renewed", r.id)
                return
            self._inflight += 1
            self._inflight_ids.add(r.id)
        lane = self._lane(r.process_name) if r.target_kind == "agent" and not ask and r.process_name else self._queue
        lane.put((r, now, mono, ask))

    def _work(self, source: _Queue) -> None:
        while True:
            item = source.get()
            if item is None:
                return
            r, now, mono, ask = item
            clock = now + timedelta(seconds=time.monotonic() - mono)  # the tick's clock, advanced
            try:
                if ask:
                    self._ask(r)
                else:
                    self._deliver(r, clock)
            except Exception:  # noqa: BLE001 - a worker must survive anything
                log.exception("reminder %s: delivery bookkeeping failed", r.id)
            finally:
                with self._idle:
                    self._inflight -= 1
                    self._inflight_ids.discard(r.id)
                    self._idle.notify_all()

    def _deliver(self, r: Reminder, clock: datetime) -> None:
        target = self.targets.get(r.target_kind)
        log.info("firing reminder %s %r to %s %s (attempt %d)", r.id, r.title, r.target_kind, r.target, r.attempts)
        try:
            if target is None:
                raise DeliveryError(f"no target for kind {r.target_kind!r}", permanent=True)
            target.fire(r)
        except DeliveryDeferred as exc:
            delay = exc.delay_s or self.cfg.defer_s
            log.info("reminder %s waits %g s: %s", r.id, delay, exc.reason)
            self.store.defer(r, exc.reason, clock + timedelta(seconds=delay), clock)
            return
        except DeliveryError as exc:
            self._failed(r, exc.reason, exc.permanent, clock)
            return
        except Exception as exc:  # noqa: BLE001 - an unexpected failure is a failed attempt, with its reason
            log.exception("reminder %s: target %s raised", r.id, r.target_kind)
            self._failed(r, f"{type(exc).__name__}: {exc}", False, clock)
            return
        nxt = self.store.mark_sent(r, clock)
        log.info("reminder %s sent%s", r.id, f"; next occurrence {nxt.id} at {nxt.due_date}" if nxt else "")

    def _failed(self, r: Reminder, reason: str, permanent: bool, clock: datetime) -> None:
        if self.stopping and not permanent:
            self.store.defer(r, f"interrupted by shutdown: {reason}", clock, clock)
            return
        if permanent or r.attempts >= self.cfg.max_attempts:
            why = reason if permanent else f"{reason} (gave up after {r.attempts} attempts)"
            nxt = self.store.mark_failed(r, why, clock)
            log.warning("reminder %s %r failed: %s%s", r.id, r.title, why,
                        f"; next occurrence {nxt.id} at {nxt.due_date}" if nxt else "")
            return
        wait = backoff_seconds(r.attempts, self.cfg.retry_backoff_s, self.cfg.max_backoff_s)
        log.warning("reminder %s attempt %d failed (%s); retrying in %g s", r.id, r.attempts, reason, wait)
        self.store.retry_later(r, reason, clock + timedelta(seconds=wait), clock)

    def _ask(self, r: Reminder) -> None:
        """Policy ask: tell the user in the chat that a reminder was missed and how to fire or drop it."""
        text = (f"Missed reminder (Jarvis was not running at its time):\n{reminder_text(r, self.describe)}\n"
                f"`jarvis reminders fire {r.id}` fires it now; `jarvis reminders cancel {r.id}` drops it.")
        thread = r.thread_id if r.target_kind == "chat" and r.thread_id else self.cfg.chat_thread
        try:
            self.chat.post(thread, f"missed-{r.id}", text, {"reminder_id": r.id, "missed": True})
        except (DeliveryError, DeliveryDeferred) as exc:
            log.warning("reminder %s is missed; could not tell the chat (%s); see `jarvis reminders list`",
                        r.id, exc)
        except Exception:  # noqa: BLE001
            log.exception("reminder %s is missed; could not tell the chat", r.id)
