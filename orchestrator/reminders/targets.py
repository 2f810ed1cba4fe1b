"""Where a due reminder goes. One `ReminderTarget` per kind: agent (agents.py), webhook (webhook.py), chat and
jorb (here).

A target's `fire` returns when the reminder was delivered, raises `DeliveryError` when it was not (the
scheduler retries with backoff, or gives up at once when `permanent`), or `DeliveryDeferred` when the target is
busy and the reminder should wait without using up an attempt.

Jorbs receive reminders through the function the scheduler is given (`wake_jorb(jorb_id, event)`: the App passes
its jorb service's delivery, where the reminder becomes the jorb's current event; tests pass their own).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from orchestrator.storage.threads import IDLE, RUNNING
from .models import Reminder, iso_utc, utcnow, written_outside_the_conversation

log = logging.getLogger(__name__)


class DeliveryError(Exception):
    """The reminder was not delivered. `permanent`: retrying cannot help (the reminder fails at once)."""

    def __init__(self, reason: str, *, permanent: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent


class DeliveryDeferred(Exception):
    """The target is busy; try again later without counting an attempt."""

    def __init__(self, reason: str, delay_s: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.delay_s = delay_s


@runtime_checkable
class ReminderTarget(Protocol):
    kind: str

    def fire(self, reminder: Reminder) -> None: ...


class ReminderEvent(BaseModel):
    """What a jorb receives as its current event when a reminder wakes it."""

    kind: Literal["reminder"] = "reminder"
    reminder_id: str
    title: str
    description: str | None = None
    due_date: str
    project_id: str | None = None
    priority: str = "medium"
    fired_at: str
    series_id: str
    rrule: str | None = None

    @classmethod
    def of(cls, r: Reminder) -> "ReminderEvent":
        return cls(**r.fire_params(), fired_at=iso_utc(utcnow()) or "", series_id=r.series_id, rrule=r.rrule)


JorbWaker = Callable[[str, ReminderEvent], None]


class JorbTarget:
    """`wake(jorb_id, event)` delivers; it raises LookupError for a jorb that does not exist and DeliveryError
    (permanent) for one that has ended. Without it (a scheduler built without jorbs) a jorb reminder waits."""

    kind = "jorb"

    def __init__(self, wake: JorbWaker | None) -> None:
        self.wake = wake

    def fire(self, reminder: Reminder) -> None:
        if self.wake is None:
            raise DeliveryDeferred("this scheduler was started without the jorbs; `jarvis run` delivers it")
        try:
            self.wake(reminder.jorb_id or "", ReminderEvent.of(reminder))
        except (DeliveryError, DeliveryDeferred):
            raise
        except LookupError as exc:
            raise DeliveryError(f"no jorb {reminder.jorb_id!r}: {exc}", permanent=True) from None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def reminder_text(r: Reminder, zone_describe: Callable[[datetime], str]) -> str:
    """The chat message of a reminder."""
    lines = [f"⏰ Reminder: {r.title}"]
    if r.description:
        lines.append(r.description)
    detail = f"(due {zone_describe(r.due_date)}"
    if r.priority != "medium":
        detail += f", priority {r.priority}"
    if r.rrule:
        detail += f", repeats {r.rrule}"
    lines.append(detail + f"; id {r.id})")
    return "\n".join(lines)


class ChatTarget:
    """Puts the reminder into a thread as an assistant message (graph.update_state as the `respond` node).

    Not a new turn: a turn would run the planner, and a reminder (which an agent may have written) must never
    make Jarvis act by itself. An AIMessage is Jarvis telling the user something; the thread stays idle and the
    user's next message continues the conversation with the reminder in view. A thread that is mid-run or
    waiting for a confirmation is not touched (updating it would drop the pending step): the reminder waits.
    """

    kind = "chat"
    STALE_RUN = timedelta(minutes=10)  # a thread "running" for longer was left so by a crashed process

    def __init__(self, graph_provider: Callable[[], Any], describe: Callable[[datetime], str], default_thread: str,
                 threads: Any = None):
        self._graph_provider = graph_provider
        self._describe = describe
        self.default_thread = default_thread
        self._threads = threads
        self._lock = threading.Lock()  # one update_state at a time per process

    def _thread_index(self, graph: Any) -> Any:
        if self._threads is None:
            runtime = getattr(graph, "jarvis", None)
            self._threads = getattr(runtime, "threads", None)
        return self._threads

    def post(self, thread_id: str, message_id: str, text: str, metadata: dict[str, Any], *,
             outside: bool = False) -> None:
        """`outside`: the text may be someone else's than the user's (an agent program's, or the planner's after
        it read outside content): the thread is then tainted from its next turn, as if it had read the text."""
        from langchain_core.messages import AIMessage

        try:
            graph = self._graph_provider()
        except DeliveryDeferred:
            raise
        except Exception as exc:  # noqa: BLE001 - cannot build the graph (config, model): retry later
            raise DeliveryError(f"cannot open the chat graph: {exc}") from None
        config = {"configurable": {"thread_id": thread_id}}
        with self._lock:
            threads = self._thread_index(graph)
            info = threads.get(thread_id) if threads is not None else None
            recent = info is not None and utcnow() - _aware(info.updated_at) < self.STALE_RUN
            snapshot = graph.get_state(config)
            if snapshot.interrupts:
                raise DeliveryDeferred(f"thread {thread_id} is waiting for a confirmation")
            if recent and (info.status == RUNNING or snapshot.next):
                raise DeliveryDeferred(f"thread {thread_id} is in the middle of a turn")
            # The message id makes a repeated delivery (after a crash) replace, not duplicate, the message.
            message = AIMessage(content=text, id=message_id, response_metadata={"source": "reminder", **metadata})
            update: dict[str, Any] = {"messages": [message]}
            if outside:  # read by the thread's next turn: that turn and the later ones ask before effects
                update["untrusted_turn"] = int((snapshot.values or {}).get("turn", 0)) + 1
            graph.update_state(config, update, as_node="respond")
            if threads is not None:
                threads.touch(thread_id, title="Reminders" if thread_id == self.default_thread else None, status=IDLE)

    def fire(self, reminder: Reminder) -> None:
        self.post(reminder.thread_id or self.default_thread, f"reminder-{reminder.id}",
                  reminder_text(reminder, self._describe), {"reminder_id": reminder.id},
                  outside=written_outside_the_conversation(reminder.created_by))
