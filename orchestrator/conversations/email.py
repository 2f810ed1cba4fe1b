"""The user's own conversation with Jarvis by email (`channels.email.chat`): a mail to Jarvis's Gmail address from
one of the user's addresses (channels.user_identities), as Gmail verified it (channels/email.sender_verified), is a
chat turn on the same graph, tools and policy as the web UI; the answer is sent back in the same email thread, and
each email thread is one Jarvis thread (`email-<Gmail thread id>`), visible in the web UI.

Who: a From: Gmail did not verify is not the user (a forged sender starts nothing and reaches no model); a mail in
a thread a jorb holds goes to that jorb as before (jorbs/router.route_inbound decides, without a model call). Once:
each mail is claimed under the same record as the jorbs' poller (`seen:<message id>`), so it is taken once across
restarts and by one of several workers; a turn a killed process left unfinished is reported in its thread at the
next start (conversations/once.py: the record moves received -> started -> answered, or reported). A flood is refused past `channels.email.chat_per_minute` (said once a
minute), a mail longer than Jarvis reads is refused with why. A confirmation is said in the thread, to be answered in the web UI or
from Telegram: an answer by email is not taken in this conversation yet.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from orchestrator.channels.email import email_channel
from orchestrator.channels.inbound import InboundMessage
from orchestrator.channels.models import ChannelState
from orchestrator.core.config import Settings
from orchestrator.core.secrets import redact
from orchestrator.core.visible import visible
from orchestrator.jorbs.router import route_inbound
from orchestrator.jorbs.store import JorbStore
from orchestrator.chat.live_turns import LiveTurn, TurnBusy, TurnHub
from orchestrator.chat.turns import user_input
from .flood import Flood
from .once import Handled, recover
from integrations.gmail_tools import MAX_BODY_CHARS

log = logging.getLogger(__name__)


def own_words(body: str) -> str:
    """The new text of a reply: the lines quoting earlier mail (`>`) and the "On ... wrote:" line above them left
    out, so an answer of Jarvis's quoted back is not read again as the user's words."""
    lines = [line for line in body.splitlines() if not line.lstrip().startswith(">")]
    while lines and (not lines[-1].strip() or lines[-1].rstrip().endswith("wrote:")):
        lines.pop()
    return "\n".join(lines).strip()


class EmailChat:
    """`hub`: the App's TurnHub. `send(to, text, thread_key)`: a mail in the user's thread (EmailChannel.send)."""

    def __init__(self, settings: Settings, hub: TurnHub, send: Any = None):
        self.settings = settings
        self.hub = hub
        self.send = send or (lambda to, text, thread_key: email_channel(settings).send(to, text, thread_key=thread_key))
        self.state = ChannelState(settings, "email")
        self.handled = Handled(self.state)
        self.jorbs = JorbStore(settings)
        self.flood = Flood("email", settings.data_dir, settings.channels.email.chat_per_minute)
        hub.watchers.append(self._watch)

    def take(self, message: InboundMessage) -> bool:
        """The poller's `converse`: True when the mail was the user's own conversation (taken once)."""
        gmail_thread = message.thread_key or ""
        if not self.settings.channels.email.chat or not gmail_thread:
            return False
        route = route_inbound(self.settings, self.jorbs, None, message, use_model=False)
        if not (route.is_user and route.jorb_id is None):
            return False
        sender, text = message.sender, message.text
        key = f"seen:{message.external_id}"  # the pollers' own record of the mail: they offer it no more
        if not self.handled.receive(key, own_words(text)):
            return True
        thread = f"email-{gmail_thread}"
        self.state.set(f"reply_to:{thread}", sender)
        if not self._take(thread, sender, text, key):
            self.handled.done(key)
        return True

    def _take(self, thread: str, sender: str, text: str, key: str) -> bool:
        """True when a turn started for the mail (its record is then ended by the relay)."""
        if self.flood.over(sender, lambda notice: self._mail(thread, notice), noun="mails", verb="write"):
            return False
        words = own_words(text)
        if len(words) > MAX_BODY_CHARS:  # the body was cut there (gmail_tools.message_body): not the whole request
            self._mail(thread, f"That mail is longer than Jarvis reads ({MAX_BODY_CHARS} characters); it was not "
                               "read. Send a shorter one, or put the text in a file in the web UI.")
            return False
        self.handled.started(key, thread, thread)  # before the turn: its relay ends the record
        try:
            self.hub.start(thread, user_input(words or "(an empty mail)"))
        except TurnBusy:
            self._mail(thread, "Still working on your last mail in this thread; this one was not read.")
            return False
        return True

    def recover(self) -> int:
        """At start: each mail whose turn a stopped process left unfinished is reported in its thread, once
        (conversations/once.py); returns how many."""
        return recover(self.handled, self.hub, self._mail)

    def _mail(self, thread: str, text: str) -> None:
        to = self.state.get(f"reply_to:{thread}")
        if to is None:
            return
        try:
            self.send(to, visible(redact(text)), thread.removeprefix("email-"))
        except Exception as exc:  # noqa: BLE001 - the thread keeps the answer; the web UI shows it
            log.warning("could not answer by email in thread %s: %s", thread, exc)

    def _watch(self, turn: LiveTurn) -> None:
        if self.state.get(f"reply_to:{turn.thread_id}") is not None:
            threading.Thread(target=self.relay, args=(turn,), name="email-relay", daemon=True).start()

    def relay(self, turn: LiveTurn) -> None:
        """The turn's whole answer, once it is written (mail is not edited as it grows); a confirmation said."""
        asked: list[str] = []
        for event in turn.follow():
            kind = event.get("event")
            if kind == "confirmation":
                asked.append(f"- {event.get('summary') or event.get('tool')}")
            elif kind in ("done", "stopped"):
                self._mail(turn.thread_id, str(event.get("content") or "(no answer)"))
            elif kind == "error":
                self._mail(turn.thread_id, f"The turn failed: {event.get('message')}")
        if asked:
            self._mail(turn.thread_id, "Jarvis asks before it acts:\n" + "\n".join(asked) +
                       "\nAnswer in the web UI (or from Telegram's buttons, when confirmations go there).")
        self.handled.turn_ended(turn.thread_id)
