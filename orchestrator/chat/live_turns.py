"""Turns running in the server: one worker thread per turn, events fanned out to any number of listeners.

The chat graph is synchronous (SqliteSaver is sync-only), so each turn runs `turns.stream_turn` in its own
thread; the events it yields are kept in order on a LiveTurn and pushed to every subscribed asyncio queue with
`call_soon_threadsafe`. A browser that reloads mid-turn subscribes again and gets the turn's events from the
start, then the live ones. One turn per thread at a time, in this process and (through claims.py, when given)
in every worker sharing the database: a second request gets TurnBusy.

Background services (scheduler, inbound routing) use the same hub to start turns, so the UI sees them live.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .turns import end_abandoned_task, stream_turn

log = logging.getLogger(__name__)

_END: dict[str, Any] = {"event": "__end__"}


class TurnBusy(Exception):
    """A turn is already running on this thread (here, or in another worker: `elsewhere` names it)."""

    def __init__(self, thread_id: str, elsewhere: str | None = None):
        super().__init__(thread_id)
        self.thread_id = thread_id
        self.elsewhere = elsewhere


@dataclass
class LiveTurn:
    thread_id: str
    started: float = field(default_factory=time.time)
    events: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    stop: threading.Event = field(default_factory=threading.Event)  # set by the user's Stop
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _listeners: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = field(default_factory=list)
    _done: threading.Event = field(default_factory=threading.Event)
    _grew: threading.Condition = field(default_factory=threading.Condition)

    def publish(self, event: dict[str, Any]) -> None:
        with self._lock:
            if event is not _END:
                self.events.append(event)
            else:
                self.finished = True
            listeners = list(self._listeners)
        with self._grew:
            self._grew.notify_all()
        for loop, queue in listeners:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, event)
            except RuntimeError:  # the listener's loop is gone (server shutting down)
                pass
        if event is _END:
            self._done.set()

    async def listen(self, since: int = 0) -> AsyncIterator[dict[str, Any]]:
        """The turn's events from index `since` on, then live ones until it ends."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        with self._lock:
            backlog = self.events[since:]
            finished = self.finished
            if not finished:
                self._listeners.append((loop, queue))
        try:
            for event in backlog:
                yield event
            if finished:
                return
            while True:
                event = await queue.get()
                if event is _END:
                    return
                yield event
        finally:
            with self._lock:
                if (loop, queue) in self._listeners:
                    self._listeners.remove((loop, queue))

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def follow(self) -> Iterator[dict[str, Any]]:
        """The turn's events from the start, then live ones until it ends, for a thread that is no event loop (a
        channel's relay): each event as soon as it is published."""
        seen = 0
        while True:
            with self._grew:
                while True:
                    with self._lock:
                        fresh, finished = self.events[seen:], self.finished
                    if fresh or finished:
                        break
                    self._grew.wait(1.0)
            seen += len(fresh)
            yield from fresh
            if finished and seen >= len(self.events):
                return


class TurnHub:
    def __init__(self, graph: Any, decorate: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 claims: Any = None, end_task: Callable[[str], Any] | None = None):
        self.graph = graph
        self.decorate = decorate or (lambda ev: ev)
        self.claims = claims  # claims.Claims: other workers on the same database see the thread as busy
        self.end_task = end_task  # a turn stopped or failed: its task's browser closed (chat/turns.py)
        self._lock = threading.Lock()
        self._running: dict[str, LiveTurn] = {}
        # told of each turn as it starts, whoever started it (the UI, a phone's answer, a channel): a channel's
        # conversation relays every turn of its threads, a resumed one too (conversations/telegram.py)
        self.watchers: list[Callable[[LiveTurn], None]] = []

    def running(self, thread_id: str) -> LiveTurn | None:
        with self._lock:
            return self._running.get(thread_id)

    def running_ids(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def start(self, thread_id: str, graph_input: Any, on_end: Callable[[], None] | None = None) -> LiveTurn:
        """Start a turn in a worker thread; TurnBusy when one already runs on this thread. `on_end` runs once the
        turn has ended and before its listeners hear so (chat/answering.py: an answer that was not applied)."""
        with self._lock:
            if thread_id in self._running:
                raise TurnBusy(thread_id)
            if self.claims is not None and not self.claims.acquire(thread_id):
                raise TurnBusy(thread_id, elsewhere=self.claims.holder(thread_id) or "another worker")
            turn = LiveTurn(thread_id)
            self._running[thread_id] = turn
        worker = threading.Thread(target=self._work, args=(turn, graph_input, on_end), name=f"turn-{thread_id}",
                                  daemon=True)
        worker.start()
        for watch in list(self.watchers):
            try:
                watch(turn)
            except Exception:  # noqa: BLE001 - a watcher's failure is not the turn's
                log.exception("a watcher of the turn on %s", thread_id)
        return turn

    def _work(self, turn: LiveTurn, graph_input: Any, on_end: Callable[[], None] | None = None) -> None:
        renewing = self.claims.keep_alive(turn.thread_id) if self.claims is not None else None
        try:
            for event in stream_turn(self.graph, turn.thread_id, graph_input, stop=turn.stop, end_task=self.end_task):
                turn.publish(self.decorate(event))
        except Exception as exc:  # noqa: BLE001 - stream_turn reports its own errors; this is a last resort
            log.exception("turn on %s failed", turn.thread_id)
            end_abandoned_task(self.end_task, turn.thread_id)
            turn.publish({"event": "error", "message": f"{type(exc).__name__}: {exc}", "kind": "internal"})
        finally:
            if renewing is not None:
                self.claims.let_go(turn.thread_id, renewing)
            with self._lock:
                self._running.pop(turn.thread_id, None)
            if on_end is not None:
                try:
                    on_end()
                except Exception:  # noqa: BLE001 - the turn itself is over either way
                    log.exception("after the turn on %s", turn.thread_id)
            turn.publish(_END)

    def stop(self, thread_id: str) -> bool:
        """Ask the turn running on `thread_id` to stop; False when none runs here."""
        turn = self.running(thread_id)
        if turn is None:
            return False
        turn.stop.set()
        return True

    def wait_all(self, timeout: float) -> None:
        """Let running turns reach their next checkpoint before the process exits."""
        deadline = time.monotonic() + timeout
        with self._lock:
            turns = list(self._running.values())
        for turn in turns:
            turn.wait(max(0.0, deadline - time.monotonic()))
