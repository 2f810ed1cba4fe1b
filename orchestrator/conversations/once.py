"""Each of the user's messages answered once, across restarts and crashes: a processed-message record per message
in the channel's state (`seen:<chat>:<message id>`), moved through received -> started (the thread its turn runs on)
-> answered, or -> reported.

The channel claims a message's record before anything is done with it, so a replayed update finds it and does
nothing. The poller stores its offset only once the message is taken (channels/telegram.TelegramPoller), so a
process killed before a turn started sees the message again and takes it (its record is still `received`).
A process killed while a turn ran leaves the record `started`: at the next start, once no worker holds the
thread, the user is told which message was not finished and what the thread holds of it (the tools that ran,
what was written), and the record becomes `reported`; the turn is not run again by itself, so nothing it did
happens twice (the effects ledger keeps what ran). A record older than these states ("1") counts as answered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from orchestrator.channels.models import ChannelState

RECEIVED, STARTED, ANSWERED, REPORTED = "received", "started", "answered", "reported"


class Handled:
    def __init__(self, state: ChannelState):
        self.state = state

    @staticmethod
    def key(chat: str, message_id: Any) -> str:
        return f"seen:{chat}:{message_id}"

    def _read(self, key: str) -> dict[str, Any]:
        return _parsed(self.state.get(key))

    def receive(self, key: str, text: str) -> bool:
        """True when the message is to be handled now: never seen, or seen by a process that stopped before its
        turn started (the poller handles one message at a time, so a `received` record is not being handled)."""
        if self.state.claim(key, json.dumps({"state": RECEIVED, "text": text[:300]})):
            return True
        return self._read(key).get("state") == RECEIVED

    def started(self, key: str, thread: str, chat: str) -> None:
        self.state.set(key, json.dumps({**self._read(key), "state": STARTED, "thread": thread, "chat": chat}))
        self.state.set(f"answering:{thread}", key)

    def done(self, key: str, state: str = ANSWERED) -> None:
        record = self._read(key)
        if record:
            self.state.set(key, json.dumps({**record, "state": state}))

    def turn_ended(self, thread: str) -> None:
        """The turn on `thread` ended (answered, stopped, failed, waiting for a confirmation)."""
        key = self.state.get(f"answering:{thread}")
        if key is not None and self._read(key).get("state") == STARTED:
            self.done(key)

    def unfinished(self) -> list[tuple[str, dict[str, Any]]]:
        """The messages whose turn started and never ended, oldest key first."""
        records = sorted((key, _parsed(raw)) for key, raw in self.state.items("seen:").items())
        return [(key, r) for key, r in records if r.get("state") == STARTED and r.get("thread")]


def recover(handled: Handled, hub: Any, say: Callable[[str, str], None]) -> int:
    """At start: each message whose turn a stopped process left unfinished is reported in its chat, `say(chat,
    text)`, once no worker holds its thread (the App's TurnHub `hub`: its running turns and claims); returns how
    many."""
    reported = 0
    for key, record in handled.unfinished():
        # the chat as recorded (a Matrix room id holds colons); older records only in their key
        thread, chat = str(record["thread"]), str(record.get("chat") or key.split(":")[1])
        claims = hub.claims
        if hub.running(thread) is not None or (claims is not None and not claims.acquire(thread)):
            continue  # still running here or in another worker: its relay ends it
        try:
            say(chat, stopped_note(hub.graph, thread, str(record.get("text") or "")))
            handled.done(key, REPORTED)
            reported += 1
        finally:
            if claims is not None:
                claims.release(thread)
    return reported


def _parsed(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    return record if isinstance(record, dict) else {"state": ANSWERED}


def stopped_note(graph: Any, thread: str, text: str) -> str:
    """What the user is told of a message whose turn was stopped by a crash: which one, the tools that ran for it,
    what had been written (the thread's checkpoint after the message)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    values = graph.get_state({"configurable": {"thread_id": thread}}).values or {}
    messages = list(values.get("messages") or [])
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=len(messages))
    after = messages[last + 1:]
    ran = [str(m.name or "a tool") for m in after if isinstance(m, ToolMessage)]
    had = "\n".join(m.text for m in after if isinstance(m, AIMessage) and m.text.strip())
    quoted = text if len(text) <= 200 else text[:200] + "..."
    note = f"I was stopped while answering \"{quoted}\"."
    if ran:
        note += f" Before that I had run: {', '.join(ran)} (not run again)."
    if had:
        note += f" Here is what I had:\n{had}\n"
    return note + " Ask again if you still want the rest."
