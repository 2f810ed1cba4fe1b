"""The one jorbs API, used by the CLI, the web UI, the chat tool and the scheduler: create, run until parked, reply,
approve, reject, answer a step, cancel, retry, inspect, recover after a restart.

Every decision names what it answers or answers what is pending now: the UI passes the interrupt it shows
(`interrupt_id`), so a click on a question that has meanwhile moved on never answers the next one (JorbMovedOn),
and `wait=False` runs the resumed step in the background (the UI polls). The CLI answers what is pending and waits
for the step. Both take the same path to `run`, with the same rules for who a reply is from and when a jorb is busy.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from langgraph.types import Command
from pydantic import ValidationError

from jarb_core.sandbox import script_spawner

from orchestrator.approvals.store import AlreadyAnswered, ApprovalStore
from orchestrator.channels.base import bounded_inbound
from orchestrator.channels.inbound import InboundMessage
from orchestrator.tools.answers import (AnswerRefused, QuestionChanged, check_decision, check_ref, resume_value,
                                        step_value, wake_value)
from orchestrator.tools.catalog import ToolCatalog
from orchestrator.storage.checkpoints import prune_later
from orchestrator.storage.claims import ClaimBusy, Claims
from orchestrator.core.config import Settings
from orchestrator.core.disk_full import disk_full_message, is_disk_full
from orchestrator.tools.executor import ToolExecutor
from orchestrator.core.ids import jorb_thread_id
from orchestrator.llm.client import make_chat_model
from orchestrator.storage.engines import make_checkpointer
from orchestrator.storage.threads import IDLE, RUNNING, WAITING, ThreadIndex
from .graph import JorbRuntime, build_jorb_graph
from .mission import MissionState, build_mission_graph
from .models import JorbRow
from .policies import resolve_policy
from .retry import RETRY, is_due
from .router import Route, RouteFlag, route_inbound
from .schema import OPEN_STATUSES, JorbState, JorbStatus, parse_step
from .store import JorbStore, new_jorb_id

log = logging.getLogger(__name__)


# One lock per jorb for the whole process: the database claim is per process (worker), so two JorbService
# objects of one process must not run the same jorb side by side either.
_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_PROCESS_LOCKS_GUARD = threading.Lock()


class JorbError(Exception):
    """A jorb operation that cannot be done as asked; the message says why and what to do."""


class JorbBusy(JorbError):
    """The jorb is running a step (in this process, or in another worker here or on another machine); decide
    again once it waits."""


class JorbMovedOn(JorbError):
    """The question answered is no longer pending (it was answered, or the jorb moved on)."""


class JorbAlreadyAnswered(JorbMovedOn):
    """Another surface answered the question first (the UI and a phone at once); the message says which, when."""


@dataclass
class JorbView:
    row: JorbRow
    pending: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None  # JorbState, or MissionState for missions
    finished: bool = False  # the graph has nothing left to run

    def as_dict(self, full: bool = False) -> dict[str, Any]:
        data = {**self.row.as_dict(), "pending": self.pending}
        if full and isinstance(self.state, JorbState):
            data["history"] = [h.model_dump() for h in self.state.history]
            data["script_results"] = [r.model_dump() for r in self.state.script_results]
            data["current_event"] = self.state.current_event
            data["step"] = self.state.step
        elif full and self.state is not None:
            data["iteration"] = self.state.iteration
            data["results"] = [r.model_dump() for r in self.state.results]
            data["notes"] = [n.model_dump() for n in self.state.notes]
        return data


class JorbService:
    def __init__(self, settings: Settings, *, catalog: ToolCatalog, llm: Any = None,
                 checkpointer: Any = None, spawn: Any = None, workers: int = 4):
        """`catalog`: the tools its steps may call (App.jorbs passes the App's catalog)."""
        self.settings = settings
        self.store = JorbStore(settings)
        self.claims = Claims(settings)
        self.threads = ThreadIndex(settings)
        self.answers = ApprovalStore(settings)  # who answered each confirmation first
        self.executor = ToolExecutor(settings, catalog)
        self._spawn = spawn
        self.rt = JorbRuntime(settings=settings, llm=llm or make_chat_model(settings, "primary", streaming=False),
                              catalog=catalog, executor=self.executor, store=self.store, threads=self.threads,
                              spawn=self._spawner)
        saver = checkpointer if checkpointer is not None else make_checkpointer(settings)
        self.graph = build_jorb_graph(self.rt, saver)
        self.mission_graph = build_mission_graph(self.rt, saver)
        self._locks_guard = threading.Lock()
        self._bursts: dict[str, tuple[threading.Timer | None, float]] = {}
        self._queued: dict[str, Future] = {}  # background runs not finished yet, by jorb
        self._following: set[str] = set()  # jorbs whose next run is being decided (see following_up)
        self._cancelling: set[str] = set()  # cancelled while a step ran: stopped when it parks (see _after)
        self._pool: ThreadPoolExecutor | None = None
        self._workers = workers

    def _spawner(self, argv: list[str]):
        if self._spawn is None:
            self._spawn = script_spawner(self.settings)  # SandboxUnavailable when required and none exists
        return self._spawn(argv)

    # -- running -------------------------------------------------------------------------------------
    def _lock(self, jorb_id: str) -> threading.Lock:
        with _PROCESS_LOCKS_GUARD:
            return _PROCESS_LOCKS.setdefault(jorb_id, threading.Lock())

    def graph_for(self, row: JorbRow | str) -> Any:
        """The compiled graph a jorb lives in: script jorbs and missions have their own."""
        mode = row.mode if isinstance(row, JorbRow) else self.store.get(row).mode
        return self.mission_graph if mode == "mission" else self.graph

    def config(self, jorb_id: str) -> dict[str, Any]:
        limit = self.settings.jorbs.max_steps_per_hour * 3 + 50
        return {"configurable": {"thread_id": jorb_thread_id(jorb_id)}, "recursion_limit": limit}

    @contextmanager
    def _hold(self, jorb_id: str) -> Iterator[None]:
        """This process's lock on the jorb, then the claim every worker honors (JorbBusy if another holds it)."""
        with self._lock(jorb_id), ExitStack() as claim:
            try:
                claim.enter_context(self.claims.held(jorb_thread_id(jorb_id)))
            except ClaimBusy as busy:
                holder = busy.holder or "it has just finished a step"
                raise JorbBusy(f"jorb {jorb_id} is running in another worker ({holder}); try again when it parks") from None
            yield

    def run(self, jorb_id: str, graph_input: Any = None) -> JorbView:
        """Run the jorb until it parks (waits for a reply, pauses, needs a confirmation) or ends."""
        row = self.store.get(jorb_id)
        with self._hold(row.id):
            view = self._run_held(row, graph_input)
        # A reply that came in while it ran (perhaps to another worker, which could not wake it) wakes it now;
        # checked after the claim is released, so a message is never left behind between two workers.
        if any(p.get("type") == "await_reply" for p in view.pending) and self.store.has_pending(row.id):
            return self._wake_now(row.id) or view
        return view

    def _run_held(self, row: JorbRow, graph_input: Any) -> JorbView:
        self.threads.touch(row.thread_id, kind="jorb", title=row.name, status=RUNNING)
        try:
            # durability "sync": each checkpoint is on disk before the next step starts (LangGraph's default
            # writes it in the background). A jorb is resumed from its checkpoints, possibly days later; with the
            # background write, a step that failed (a full disk) could leave not even the checkpoint before it,
            # and the jorb could not be retried (seen as an intermittent failure of
            # test_a_jorb_stopped_by_a_full_disk_is_retried_once_there_is_space under load).
            self.graph_for(row).invoke(graph_input, self.config(row.id), durability="sync")
        except Exception as exc:
            if is_disk_full(exc):
                log.error("jorb %s stopped: the disk is full (%s)", row.id, exc)
                error = disk_full_message(f"jorb {row.id}'s step could not be saved") + \
                    f" Then run the step again: `jarvis jorbs retry {row.id}`, or Retry on the jorb in the web UI."
            else:
                # One line by default (the CLI prints it under its own message); the traceback at debug level.
                log.error("jorb %s failed: %s: %s", row.id, type(exc).__name__, exc)
                log.debug("jorb %s failed", row.id, exc_info=exc)
                error = f"{type(exc).__name__}: {exc}"
            try:
                self.store.update(row.id, status=JorbStatus.FAILED, error=error)
            except Exception as store_exc:  # noqa: BLE001 - the disk may refuse this write too; the log has it
                log.error("could not record that jorb %s failed: %s", row.id, store_exc)
            self.executor.sites.end_task(row.thread_id)  # its browser goes; a retry starts another
            raise
        prune_later(self.settings, row.thread_id)
        view = self.view(row.id)
        if self._sync_status(view):
            view.row = self.store.get(row.id)
        if view.row.status not in OPEN_STATUSES:  # done or cancelled: the browsers its steps used are closed
            self.executor.sites.end_task(row.thread_id)
        return view

    def submit(self, jorb_id: str, graph_input: Any = None) -> Future:
        """Run in the background (the server, the chat tool); errors are logged and stored on the jorb."""
        return self._submit_call(jorb_id, lambda: self.run(jorb_id, graph_input))

    def _submit_call(self, jorb_id: str, call: Callable[[], JorbView | None]) -> Future:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="jorb")

        def work() -> JorbView | None:
            try:
                return call()
            except JorbBusy as exc:
                log.info("%s", exc)
                return None
            except Exception:  # noqa: BLE001 - recorded on the jorb row by run()
                return None

        future = self._pool.submit(work)
        with self._locks_guard:
            self._queued[jorb_id] = future

        def forget(done: Future) -> None:
            with self._locks_guard:
                if self._queued.get(jorb_id) is done:
                    del self._queued[jorb_id]

        future.add_done_callback(forget)
        return future

    def queued(self, jorb_id: str) -> Future | None:
        """The background run of the jorb not finished yet, if any."""
        with self._locks_guard:
            return self._queued.get(jorb_id)

    def busy(self, jorb_id: str) -> bool:
        """A step of the jorb runs, or is queued to run, or its next run is being decided, in this process (the UI
        waits before deciding again)."""
        with self._locks_guard:
            if jorb_id in self._following:
                return True
        future = self.queued(jorb_id)
        return (future is not None and not future.done()) or self._lock(jorb_id).locked()

    @contextmanager
    def following_up(self, jorb_id: str) -> Iterator[None]:
        """The jorb reads as busy while what follows a run is decided and started (a cancel that raced the run
        landing, a reply that came in meanwhile waking it): between the run's end and the next run's start it
        read as settled, a cancelled jorb with its wait still pending."""
        with self._locks_guard:
            self._following.add(jorb_id)
        try:
            yield
        finally:
            with self._locks_guard:
                self._following.discard(jorb_id)

    def wait_background(self, timeout: float | None = None) -> None:
        """Wait for pending burst timers and background runs (tests, and a CLI process before it exits)."""
        while True:
            with self._locks_guard:
                timers = [t for t, _ in self._bursts.values() if t is not None]
            if not timers:
                break
            for t in timers:
                t.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _sync_status(self, view: JorbView) -> bool:
        """Status the nodes cannot set themselves (a confirmation or a human step is pending). True if changed."""
        row = view.row
        if view.finished:
            self.threads.set_status_later(row.thread_id, IDLE)
            return False
        self.threads.set_status_later(row.thread_id, WAITING if view.pending else RUNNING)
        kinds = {p.get("type") for p in view.pending}
        if "confirmation" in kinds:
            summary = next(p.get("summary") for p in view.pending if p.get("type") == "confirmation")
            self.store.update(row.id, status=JorbStatus.PAUSED, pause_reason=f"waiting for confirmation: {summary}")
            return True
        if "human_step" in kinds:
            self.store.update(row.id, status=JorbStatus.AWAITING_REPLY, waiting_channel="user", waiting_party="user")
            return True
        return False

    # -- creating and inspecting ---------------------------------------------------------------------
    def create(self, name: str, plan: str, *, contacts: list[str] | None = None, policy: str = "llm",
               autonomy: dict[str, str] | None = None, context: list[str] | None = None, mode: str = "script",
               options: dict[str, Any] | None = None, origin_thread: str | None = None, start: bool = True,
               background: bool = False, untrusted: bool = False) -> JorbView:
        """`untrusted`: started from a turn that had read outside content (its effects ask first from the start)."""
        if not name.strip() or not plan.strip():
            raise JorbError("a jorb needs a name and a plan")
        try:
            resolve_policy(policy)
        except ValueError as exc:
            raise JorbError(str(exc)) from None
        for effect, mode_value in (autonomy or {}).items():
            if mode_value not in ("auto", "confirm", "deny"):
                raise JorbError(f"autonomy override {effect}={mode_value}: use auto, confirm or deny")
        # Claimed before its row exists, so no recovery sweep (of this worker or another) takes the new jorb for a
        # leftover before its first run; the run renews and releases the claim.
        jorb_id = new_jorb_id()
        self.claims.acquire(jorb_thread_id(jorb_id))
        row = self.store.create(name=name, plan=plan, contacts=contacts, policy=policy, autonomy=autonomy,
                                context=context, mode=mode, options=options, origin_thread=origin_thread,
                                jorb_id=jorb_id)
        self.threads.touch(row.thread_id, kind="jorb", title=name, status=RUNNING)
        first = ({"jorb_id": row.id} if mode == "mission"
                 else {"jorb_id": row.id, "current_event": {"type": "created", "task": name}})
        if untrusted:
            first["untrusted"] = True
        if start:
            if background:
                self.submit(row.id, first)
            else:
                return self.run(row.id, first)
        return self.view(row.id)

    def view(self, jorb_id: str) -> JorbView:
        row = self.store.get(jorb_id)
        snapshot = self.graph_for(row).get_state(self.config(row.id))
        pending = [{"interrupt_id": i.id, **(i.value if isinstance(i.value, dict) else {"value": i.value})}
                   for i in snapshot.interrupts]
        state_model = MissionState if row.mode == "mission" else JorbState
        try:
            state = state_model.model_validate(snapshot.values) if snapshot.values else None
        except ValidationError:  # read while its first step is still being written (a background run)
            state = None
        return JorbView(row=row, pending=pending, state=state, finished=not snapshot.next)

    def list(self, statuses: tuple[str, ...] | None = None, mode: str | None = None) -> list[JorbRow]:
        return self.store.list(statuses=statuses, mode=mode)

    # -- what the user and the world send in ------------------------------------------------------------
    def reply(self, jorb_id: str, text: str, *, party: str | None = None, channel: str = "local",
              is_user: bool = False, background: bool = False, reasoning: str | None = None) -> JorbView:
        """A message as the counterpart (or as the user: an intervention). It waits in the jorb's queue until the
        jorb next waits for a reply; a jorb waiting right now is woken (a jorb working now takes it when it
        parks). From: the user when `is_user`, else `party`, else whom the jorb waits for, else its first
        contact."""
        if not text.strip():
            raise JorbError("the message is empty")
        row = self.store.get(jorb_id)
        if row.status not in OPEN_STATUSES:
            raise JorbError(f"jorb {row.id} is {row.status}; it takes no more messages")
        waiting_on = row.waiting_party if row.waiting_party != "user" else None  # "user": a human-policy step
        sender = "user" if is_user else (party or waiting_on or (row.contacts[0] if row.contacts else "user"))
        self.store.log_message(direction="in", channel=channel, party=sender, text=text, status="pending",
                               jorb_id=row.id, is_user=is_user, reasoning=reasoning)
        if self.busy(row.id):
            return self.view(row.id)
        return self.wake(row.id, background=background)

    def deliver_event(self, jorb_id: str, event: dict[str, Any], background: bool = False) -> JorbView:
        """A reminder (or another event) for the jorb: it becomes the current event of its next step."""
        row = self.store.get(jorb_id)
        if row.status not in OPEN_STATUSES:
            raise JorbError(f"jorb {row.id} is {row.status}; it takes no more events")
        self.store.log_message(direction="in", channel="event", party="jarvis", text=json.dumps(event, default=str),
                               status="pending", jorb_id=row.id)
        return self.wake(row.id, background=background)

    def wake(self, jorb_id: str, background: bool = False) -> JorbView:
        """Resume a jorb waiting for a reply; other states keep the message until their next wait. A jorb another
        worker runs is left to it: that worker takes the message when its step ends."""
        view = self.view(jorb_id)
        if any(p.get("type") == "await_reply" for p in view.pending):
            if background:
                self._submit_call(view.row.id, lambda: self._wake_now(view.row.id))
                return view
            return self._wake_now(view.row.id) or self.view(view.row.id)
        return view

    def _wake_now(self, jorb_id: str) -> JorbView | None:
        """Under the claim, resume the jorb if it still waits for a reply and one is pending (checked again there:
        another worker may have taken the message meanwhile). None if there was nothing to wake."""
        view = None
        for _ in range(10):  # messages that arrive during the run wake it again
            try:
                with self._hold(jorb_id):
                    current = self.view(jorb_id)
                    waiting = [p for p in current.pending if p.get("type") == "await_reply"]
                    if not waiting or not self.store.has_pending(jorb_id):
                        break
                    view = self._run_held(current.row, Command(resume={waiting[0]["interrupt_id"]: wake_value()}))
            except JorbBusy:
                break  # its holder follows up when its step ends
        return view

    def resume_waiting(self) -> list[str]:
        """Wake every jorb whose reply is pending (it came in while the jorb ran here or in another worker, or
        while no worker was up). Each is resumed by exactly one worker, whichever claims it first."""
        woken = []
        for jorb_id in self.store.waiting_with_pending():
            try:
                if self._wake_now(jorb_id) is not None:
                    woken.append(jorb_id)
            except Exception:  # noqa: BLE001 - recorded on the jorb row by run()
                continue
        return woken

    def inbound(self, message: InboundMessage, *, background: bool = False, debounce: bool = False) -> Route:
        """A message from the world. Routed to its jorb (which wakes: at once, or after the burst window when
        `debounce`, so that several messages in a row wake it once, together) or kept in the inbox."""
        channel, sender, thread_key, external_id = (message.channel, message.sender, message.thread_key,
                                                    message.external_id)
        text = bounded_inbound(message.text)
        route = route_inbound(self.settings, self.store, self.rt.llm, replace(message, text=text))
        if RouteFlag.UNVERIFIED_SENDER in route.flags:  # the jorb (and the inbox) see that it is not the user
            text = (f"[unverified sender: this message claims to come from the user's address ({sender}), but the "
                    f"mail server did not confirm it; it is not the user] {text}")
        elif RouteFlag.HANDLE_CHANGED_HANDS in route.flags:
            text = (f"[not the user: this message comes under the user's handle ({sender}) but from another account "
                    f"than the one that handle belonged to; it is not the user] {text}")
        if route.jorb_id:
            row = self.store.get(route.jorb_id)
            self.store.log_message(direction="in", channel=channel, party=sender, text=text, status="pending",
                                   jorb_id=row.id, is_user=route.is_user, reasoning=route.reasoning,
                                   external_id=external_id, thread_key=thread_key)
            window = self.settings.channels.burst_window_s
            if debounce and window > 0:
                self._wake_after_quiet(row.id, window)
            else:
                self.wake(row.id, background=background)
        else:
            self.store.log_message(direction="in", channel=channel, party=sender, text=text, status=route.status,
                                   reasoning=route.reasoning, is_user=route.is_user, external_id=external_id,
                                   thread_key=thread_key)
        return route

    def _wake_after_quiet(self, jorb_id: str, window: float) -> None:
        """Wake once the sender has been quiet for `window` seconds (at most 3 windows after the first message)."""
        now = time.monotonic()
        with self._locks_guard:
            timer, first = self._bursts.get(jorb_id, (None, now))
            if timer is not None:
                timer.cancel()
            delay = max(0.0, min(window, first + 3 * window - now))

            def fire() -> None:
                try:
                    self.wake(jorb_id, background=True)
                finally:
                    with self._locks_guard:
                        if self._bursts.get(jorb_id, (None, 0))[0] is timer:
                            self._bursts.pop(jorb_id, None)

            timer = threading.Timer(delay, fire)
            timer.daemon = True
            self._bursts[jorb_id] = (timer, first)
            timer.start()

    # -- decisions -------------------------------------------------------------------------------------
    # `interrupt_id`: what the user saw and answers (the UI); None answers what is pending now (the CLI).
    # `wait=False`: the resumed step runs in the background and the view before it is returned.
    # `via`: where the answer came from (the CLI, the web UI, telegram, email), recorded with it.
    # `ref`: the question the user saw (answers.item_ref), when an interrupt id may ask another one by now.
    def approve(self, jorb_id: str, note: str | None = None, *, interrupt_id: str | None = None,
                ref: str | None = None, wait: bool = True, via: str = "the CLI") -> JorbView:
        """Approve what a paused jorb asks (its own pause, a mission's question, or one confirmation)."""
        return self._decide(jorb_id, "approve", note, interrupt_id, ref, wait, via)

    def reject(self, jorb_id: str, note: str | None = None, *, interrupt_id: str | None = None,
               ref: str | None = None, wait: bool = True, via: str = "the CLI") -> JorbView:
        return self._decide(jorb_id, "deny", note, interrupt_id, ref, wait, via)

    def _decide(self, jorb_id: str, answer: str, note: str | None, interrupt_id: str | None, ref: str | None,
                wait: bool, via: str) -> JorbView:
        view, item = self._parked(jorb_id, interrupt_id, ("jorb_pause", "confirmation"), "an approval")
        try:
            check_ref(item, ref)
        except QuestionChanged as exc:
            raise JorbMovedOn(str(exc)) from None
        value = resume_value(item, answer, note=note)
        with self.answering([item], answer, via):
            return self._go(view, Command(resume={item["interrupt_id"]: value}), wait)

    @contextmanager
    def answering(self, items: list[dict[str, Any]], answer: str, via: str) -> Iterator[None]:
        """Only the first answer to a confirmation resumes the jorb (the UI and a phone at once): the others are
        told who answered and when (JorbAlreadyAnswered). An answer that could not be applied is withdrawn."""
        refs = []
        try:
            for item in items:
                if item.get("type") == "confirmation":
                    refs.append(self.answers.claim_answer(item, answer, via))
        except AlreadyAnswered as exc:
            for ref in refs:
                self.answers.release_answer(ref)
            raise JorbAlreadyAnswered(str(exc)) from None
        try:
            yield
        except BaseException:
            for ref in refs:
                self.answers.release_answer(ref)
            raise

    def resume(self, jorb_id: str, decisions: dict[str, dict[str, Any]], *, wait: bool = True,
               via: str = "the web UI", refs: dict[str, str] | None = None) -> JorbView:
        """Answers from the confirmation dialog: {interrupt_id: {"decision": approve|edit|deny|skip, ...}}, each
        checked against the question it answers (`refs`: {interrupt_id: the ref of the question shown})."""
        for interrupt_id in decisions:
            self.refuse_if_answered(jorb_id, interrupt_id)
        view = self._settled(jorb_id)
        asked = {p["interrupt_id"]: p for p in view.pending if p.get("type") == "confirmation"}
        if not asked:
            raise JorbMovedOn(f"jorb {view.row.id} is not waiting for a confirmation any more; reload")
        for interrupt_id, decision in decisions.items():
            item = asked.get(interrupt_id)
            if item is None:
                raise JorbMovedOn(f"the confirmation {interrupt_id} is no longer pending; reload")
            try:
                check_ref(item, (refs or {}).get(interrupt_id))
                check_decision(item, decision)
            except QuestionChanged as exc:
                raise JorbMovedOn(str(exc)) from None
            except AnswerRefused as exc:
                raise JorbError(str(exc)) from None
        answered = [asked[i] for i in decisions]
        word = "deny" if all(d.get("decision") in ("deny", "skip") for d in decisions.values()) else "approve"
        with self.answering(answered, word, via):
            return self._go(view, Command(resume=decisions), wait)

    def answer_step(self, jorb_id: str, step: dict[str, Any] | str, *, interrupt_id: str | None = None,
                    wait: bool = True) -> JorbView:
        """The human policy: the user's step, checked before the jorb sees it."""
        view, item = self._parked(jorb_id, interrupt_id, ("human_step",), "a step from you")
        try:
            parse_step(step if isinstance(step, str) else json.dumps(step))
        except ValueError as exc:
            raise JorbError(f"that step cannot be used: {exc}") from None
        return self._go(view, Command(resume={item["interrupt_id"]: step_value(step)}), wait)

    def _settled(self, jorb_id: str) -> JorbView:
        view = self.view(jorb_id)
        if self.busy(view.row.id):
            raise JorbBusy(f"jorb {view.row.id} is working; decide again once it waits")
        return view

    def refuse_if_answered(self, jorb_id: str, interrupt_id: str) -> None:
        """JorbAlreadyAnswered, saying where and when, when another surface (the UI, a phone) answered this
        question: rather than "busy" while its step runs, or "moved on" after."""
        first = self.answers.last_answer(jorb_thread_id(jorb_id), interrupt_id)
        if first is None:
            return
        shown = next((p for p in self.view(jorb_id).pending if p["interrupt_id"] == interrupt_id), None)
        if shown is None or self.answers.answered(self.answers.ref(shown)) is not None:
            raise JorbAlreadyAnswered(first.describe())

    def _parked(self, jorb_id: str, interrupt_id: str | None, types: tuple[str, ...],
                what: str) -> tuple[JorbView, dict[str, Any]]:
        if interrupt_id is not None:
            self.refuse_if_answered(jorb_id, interrupt_id)
        view = self._settled(jorb_id)
        if interrupt_id is not None:
            item = next((p for p in view.pending if p["interrupt_id"] == interrupt_id), None)
            if item is None:
                raise JorbMovedOn(f"jorb {view.row.id} no longer waits for that (it was answered, or it moved on); "
                                  "reload to see where it stands")
        elif view.pending:
            item = view.pending[0]
        else:
            raise JorbError(f"jorb {view.row.id} is {view.row.status} and is not waiting for a decision")
        if item.get("type") not in types:
            kind = "a reply" if item.get("type") == "await_reply" else f"a {item.get('type')}"
            raise JorbError(f"jorb {view.row.id} is waiting for {kind}, not for {what}")
        return view, item

    def _go(self, view: JorbView, graph_input: Any, wait: bool) -> JorbView:
        if wait:
            return self.run(view.row.id, graph_input)
        self._follow(self.submit(view.row.id, graph_input), view.row.id)
        return view

    def _follow(self, future: Future, jorb_id: str) -> None:
        future.add_done_callback(lambda _f: self._after(jorb_id))

    def _after(self, jorb_id: str) -> None:
        """Once a background run parks: a reply that came in while it worked wakes it; a cancel that raced it
        lands."""
        try:
            if self.busy(jorb_id):
                return
            with self.following_up(jorb_id):
                view = self.view(jorb_id)
                if not view.pending:
                    self._cancelling.discard(jorb_id)
                    return
                if jorb_id in self._cancelling or view.row.status == JorbStatus.CANCELLED:
                    # A node that parks (wait, hold) sets its own status: the cancel is applied again here.
                    self.store.update(jorb_id, status=JorbStatus.CANCELLED)
                    self._go(view, self._cancel_input(view), wait=False)
                elif self.store.has_pending(jorb_id):
                    waiting = [p for p in view.pending if p.get("type") == "await_reply"]
                    if waiting:
                        self._go(view, Command(resume={waiting[0]["interrupt_id"]: wake_value()}), wait=False)
        except Exception:  # noqa: BLE001 - a follow-up must never break the worker; the jorb row shows the state
            log.exception("follow-up of jorb %s failed", jorb_id)

    @staticmethod
    def _cancel_input(view: JorbView) -> Command:
        return Command(resume={p["interrupt_id"]: resume_value(p, "cancel") for p in view.pending})

    def stalled(self, row: JorbRow) -> bool:
        """Mid-step (planning / running) with nothing running it: its run stopped on an error it could not even
        record (a full disk), or its worker died. No worker, here or elsewhere, holds it."""
        return (row.status in (JorbStatus.PLANNING, JorbStatus.RUNNING) and not self.busy(row.id)
                and self.claims.holder(row.thread_id) in (None, self.claims.worker))

    def retry_input(self, jorb_id: str) -> JorbRow:
        """Make a failed or stalled jorb ready to run its interrupted step again from its last checkpoint (side
        effects that step already made are answered from the effects ledger). JorbError when there is none."""
        row = self.store.get(jorb_id)
        if row.status != JorbStatus.FAILED and not self.stalled(row):
            raise JorbError(f"jorb {row.id} is {row.status}" + (" and working" if self.busy(row.id) else "") +
                            "; only a failed or stalled jorb is retried")
        snapshot = self.graph_for(row).get_state(self.config(row.id))
        if not snapshot.next:
            raise JorbError(f"jorb {row.id} has no step left to run again (it failed after its last step); "
                            "create a new jorb to go on")
        self.store.update(row.id, status=JorbStatus.RUNNING, error=None)
        return self.store.get(row.id)

    def retry(self, jorb_id: str, *, wait: bool = True) -> JorbView:
        """Run a failed or stalled jorb's interrupted step again."""
        if self.busy(jorb_id):
            raise JorbBusy(f"jorb {jorb_id} is working already")
        row = self.retry_input(jorb_id)
        return self._go(self.view(row.id), None, wait)

    def cancel(self, jorb_id: str, *, wait: bool = True) -> JorbView:
        """Cancel an open jorb. One that is working sees the status at its next step, or is stopped when it parks."""
        view = self.view(jorb_id)
        if view.row.status not in OPEN_STATUSES:
            raise JorbError(f"jorb {view.row.id} is already {view.row.status}")
        self.store.update(view.row.id, status=JorbStatus.CANCELLED)
        if self.busy(view.row.id):
            self._cancelling.add(view.row.id)
            running = self.queued(view.row.id)  # started elsewhere (create, an inbound message): follow it too
            if running is not None:
                self._follow(running, view.row.id)
            return self.view(view.row.id)
        if not view.pending:
            return self.view(view.row.id)
        return self._go(view, self._cancel_input(view), wait)

    def set_policy(self, jorb_id: str, policy: str) -> JorbRow:
        row = self.store.get(jorb_id)
        if row.status not in (JorbStatus.PAUSED, JorbStatus.AWAITING_REPLY, JorbStatus.PLANNING):
            raise JorbError(f"swap the policy of a paused jorb; {row.id} is {row.status}")
        try:
            resolve_policy(policy)
        except ValueError as exc:
            raise JorbError(str(exc)) from None
        self.store.update(row.id, policy=policy)
        return self.store.get(row.id)

    def retry_due(self, now: float | None = None) -> list[str]:
        """Jorbs paused because their model was down whose next try has come (jorbs/retry.py) take their step
        again, one after the other. One another worker holds, or the user answered meanwhile, is left as it is."""
        tried = []
        for row in self.store.list(statuses=(JorbStatus.PAUSED,), limit=100_000):  # jorbs and missions
            # read without the claim first: a user answering another paused jorb is not told it is busy
            if self.busy(row.id) or not any(is_due(p, now) for p in self.view(row.id).pending):
                continue
            try:
                with self._hold(row.id):
                    view = self.view(row.id)  # again, under the claim: it may have moved on
                    due = next((p for p in view.pending if is_due(p, now)), None)
                    if due is None or view.row.status != JorbStatus.PAUSED:
                        continue
                    log.info("jorb %s (%s): trying the model again", row.id, row.name)
                    self._run_held(view.row, Command(resume={due["interrupt_id"]: {"type": RETRY}}))
            except JorbBusy:
                continue
            except Exception:  # noqa: BLE001 - recorded on the jorb row by _run_held
                continue
            tried.append(row.id)
            # as after any run in the background: a cancel that came while it ran lands, a reply wakes it
            self._after(row.id)
        return tried

    # -- restarts -----------------------------------------------------------------------------------------
    def recover(self) -> list[str]:
        """Jorbs a dead worker left mid-step (planning / running) retry that step; side effects already
        executed are answered from the effects ledger, not repeated. Then jorbs with a reply waiting wake.
        Safe to call while jorbs run: one held by a live worker (this one or another) is skipped."""
        resumed = []
        for row in self.store.list(statuses=(JorbStatus.PLANNING, JorbStatus.RUNNING)):
            if self.busy(row.id) or self.claims.holder(row.thread_id) == self.claims.worker:
                continue  # running, queued or just created in this process: not a leftover
            try:
                # Checked under the claim: a jorb "running" in a live worker is that worker's, not a leftover.
                with self._hold(row.id):
                    row = self.store.get(row.id)  # again, under the claim: a run may have ended meanwhile
                    snapshot = self.graph_for(row).get_state(self.config(row.id))
                    if row.status not in (JorbStatus.PLANNING, JorbStatus.RUNNING) or snapshot.interrupts:
                        continue
                    graph_input = None if snapshot.next else (
                        {"jorb_id": row.id} if row.mode == "mission"
                        else {"jorb_id": row.id, "current_event": {"type": "created"}})
                    log.info("resuming jorb %s (%s), left mid-step by a worker that stopped", row.id, row.name)
                    self._run_held(row, graph_input)
            except JorbBusy:
                continue
            except Exception:  # noqa: BLE001 - logged and stored by run()
                continue
            resumed.append(row.id)
        return resumed + [j for j in self.resume_waiting() if j not in resumed]
