"""The user's own conversation with Jarvis over Telegram: a message the user types in their private chat with the
bot is a chat turn, on the same graph, planner, tools, policy and taint as the web UI's (the App's TurnHub), one
thread per chat until `/new`.

Who: only the user, as `channels.user_identities` says (`telegram:<id>`, or a @handle bound to the account it was
first seen with: jorbs/router.route_inbound decides, without a model call), in a private chat (the chat is the
sender's own). A message that route sends to a jorb (a reply in a conversation a jorb holds) goes there as today,
and everyone else's go where they went (jorbs, the inbox): a stranger never starts a turn and reaches no model here.

Once: each message is taken once, across restarts, replays and crashes (conversations/once.py: a processed-message
record claimed before anything is done, moved to started and answered; a turn a killed process left unfinished is
reported in the chat at the next start, `recover`). Edits are not asked for
(allowed_updates), so a message edited after it was answered starts no second turn. A flood is refused past
`channels.telegram.chat_per_minute` (said once a minute), a message longer than Telegram itself allows is refused
with why. A document is taken as a file dropped on the web UI is (outside content: the thread is tainted), a voice
message is transcribed and what was heard is the message (conversations/telegram_files.py); anything else (a
photo, a sticker) is refused, said so.

Out: every turn on a chat's thread is relayed to the chat, whoever started it (the chat, the web UI, a press that
answered a confirmation): TurnHub's watchers. The answer streams into one message (channels/telegram_replies.py);
a confirmation is sent with Approve / Deny buttons carrying one-time tokens bound to the call (the approvals
notifier), answered through the same approvals as every surface (approvals/remote.py: the first answer wins).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from orchestrator.channels.addresses import normalize_party
from orchestrator.channels.inbound import InboundMessage
from orchestrator.channels.models import ChannelState
from orchestrator.channels.telegram import bot_api
from orchestrator.channels.telegram_replies import LIMIT, Reply
from orchestrator.chat.uploads import with_attachments
from orchestrator.conversations.flood import Flood
from orchestrator.conversations.once import Handled, recover
from orchestrator.conversations.telegram_files import Received, Refused, received
from orchestrator.core.config import Settings
from orchestrator.core.secrets import redact
from orchestrator.core.visible import visible
from orchestrator.jorbs.router import route_inbound
from orchestrator.jorbs.store import JorbStore
from orchestrator.storage.threads import ThreadIndex
from orchestrator.chat.live_turns import LiveTurn, TurnBusy, TurnHub
from orchestrator.chat.turns import user_input

log = logging.getLogger(__name__)

HELP = ("You are talking to Jarvis, on the same tools and rules as its web UI.\n"
        "/new starts a new conversation\n/stop stops the answer being written\n"
        "/threads lists this chat's conversations\n/pending lists what waits for your confirmation\n/help this text")
TOO_LONG = (f"That message is longer than Telegram allows ({LIMIT} characters); it was not read. "
            "Send a shorter one, or put the text in a file in the web UI.")


class TelegramChat:
    """`hub`: the App's TurnHub; `send_confirmation(item, chat)`: the approvals notifier's Telegram message with
    buttons; `pending(thread_id=None)`: what waits for the user, on one thread or on all (App.pending)."""

    def __init__(self, settings: Settings, hub: TurnHub, send_confirmation: Callable[[dict[str, Any], str], None],
                 pending: Callable[..., list[dict[str, Any]]], api: Any = None):
        self.settings = settings
        self.cfg = settings.channels.telegram
        self.hub = hub
        self.send_confirmation = send_confirmation
        self.pending = pending
        self.api = api or bot_api(settings)
        self.state = ChannelState(settings, "telegram")
        self.handled = Handled(self.state)
        self.jorbs = JorbStore(settings)
        self.flood = Flood("telegram", settings.data_dir, self.cfg.chat_per_minute)
        hub.watchers.append(self._watch)

    # -- in ---------------------------------------------------------------------------------------------------
    def users_own(self, message: dict[str, Any]) -> bool:
        """The user's message in their private chat, which no jorb's conversation claims."""
        sender, chat = message.get("from") or {}, message.get("chat") or {}
        if chat.get("type") != "private" or not sender.get("id") or str(chat.get("id")) != str(sender.get("id")):
            return False
        handle = normalize_party("@" + sender["username"]) if sender.get("username") else None
        route = route_inbound(self.settings, self.jorbs, None,
                              InboundMessage("telegram", handle or str(sender["id"]), message.get("text") or "",
                                             thread_key=str(chat["id"]), sender_id=f"telegram:{sender['id']}"),
                              use_model=False)
        return route.is_user and route.jorb_id is None

    def take(self, message: dict[str, Any]) -> bool:
        """The poller's `converse`: True when the message was the user's own conversation (handled, or refused
        with why), False when it goes where other messages go."""
        if not self.cfg.chat or not self.users_own(message):
            return False
        chat = str(message["chat"]["id"])
        key = Handled.key(chat, message.get("message_id"))
        said = message.get("text") or message.get("caption") or "(a file or a voice message)"
        if not self.handled.receive(key, str(said)):
            log.info("telegram message %s of chat %s was already taken: not again", message.get("message_id"), chat)
            return True
        if not self._take(chat, message, key):
            self.handled.done(key)
        return True

    def _file_taken(self, chat: str, receive: Callable[[], Received]) -> Received | None:
        """A file or voice message taken as an upload (what was heard said back), or None when refused: the chat is
        told why."""
        try:
            handed = receive()
        except Refused as exc:
            self._say(chat, str(exc))
            return None
        if handed.heard is not None:
            self._say(chat, f"Heard: {handed.heard}")
        return handed

    def _take(self, chat: str, message: dict[str, Any], key: str) -> bool:
        """True when a turn started for the message (its record is then ended by the relay)."""
        if self.flood.over(chat, lambda notice: self._say(chat, notice)):
            return False
        text, new = message.get("text"), None
        if not isinstance(text, str):
            handed = self._file_taken(chat, lambda: received(self.settings, self.api, message))
            if handed is None:
                return False
            text, new = handed.text, handed.attachments
        if len(text) > LIMIT:
            self._say(chat, TOO_LONG)
            return False
        command = text.strip().split(maxsplit=1)[0].split("@", 1)[0].lower() if text.strip().startswith("/") else ""
        if command and new is None:
            self._command(chat, command)
            return False
        return self._start(chat, text, new, key)

    def thread_of(self, chat: str) -> str:
        """The chat's current thread (made on its first message)."""
        thread = self.state.get(f"thread:{chat}")
        return thread or self._new_thread(chat)

    def _new_thread(self, chat: str) -> str:
        number = int(self.state.get(f"threads:{chat}", "0") or 0) + 1
        thread = self._thread_name(chat, number)
        self.state.set(f"threads:{chat}", str(number))
        self.state.set(f"chat_of:{thread}", chat)
        self.state.set(f"thread:{chat}", thread)
        return thread

    def _thread_name(self, chat: str, number: int) -> str:
        return f"telegram-{chat}-{number}"

    def _reply(self, chat: str) -> Any:
        """One answer being written into the chat (telegram_replies.Reply; the Matrix conversation's own)."""
        return Reply(self.api, chat, self.cfg.edit_every_s)

    def _start(self, chat: str, text: str, new: list[dict[str, Any]] | None, key: str) -> bool:
        thread = self.thread_of(chat)
        if self.pending(thread):
            self._say(chat, "This conversation waits for your answer to the confirmation above (Approve or Deny); "
                            "nothing else was done. /new starts another conversation.")
            return False
        attachments = None
        if new:
            held = self.hub.graph.get_state({"configurable": {"thread_id": thread}}).values
            attachments = with_attachments(held.get("attachments", []), new)
        self.handled.started(key, thread, chat)  # before the turn: its relay ends the record
        try:
            self.hub.start(thread, user_input(text, attachments))
        except TurnBusy:
            self._say(chat, "Still working on your last message; /stop stops it. This one was not read.")
            return False
        return True

    def recover(self) -> int:
        """At start: each message whose turn a stopped process left unfinished is reported in its chat (once no
        worker holds its thread); returns how many."""
        return recover(self.handled, self.hub, self._say)

    def _command(self, chat: str, command: str) -> None:
        if command == "/new":
            self._say(chat, f"New conversation ({self._new_thread(chat)}). What can I do?")
        elif command == "/stop":
            stopped = self.hub.stop(self.thread_of(chat))
            self._say(chat, "Stopping." if stopped else "Nothing is running.")
        elif command == "/threads":
            mine = [t for t in ThreadIndex(self.settings).list(limit=200)
                    if self.state.get(f"chat_of:{t.thread_id}") == chat][:10]
            current = self.thread_of(chat)
            lines = [f"{'* ' if t.thread_id == current else ''}{t.thread_id}: {t.title or '(untitled)'}" for t in mine]
            self._say(chat, "\n".join(lines) or "No conversations yet.")
        elif command == "/pending":
            items = self.pending()
            lines = [f"{p.get('summary') or p.get('tool')} ({p.get('thread_id')})" for p in items[:20]]
            self._say(chat, "Waiting for you:\n" + "\n".join(lines) if lines else "Nothing waits for you.")
        else:
            self._say(chat, HELP)

    def _say(self, chat: str, text: str) -> None:
        try:
            self._reply(chat).finish(visible(redact(text)))
        except Exception as exc:  # noqa: BLE001 - the poller goes on; the next message may get through
            log.warning("could not write to chat %s: %s", chat, exc)

    # -- out --------------------------------------------------------------------------------------------------
    def _watch(self, turn: LiveTurn) -> None:
        chat = self.state.get(f"chat_of:{turn.thread_id}")
        if chat is not None:
            threading.Thread(target=self.relay, args=(turn, chat), name=f"telegram-relay-{chat}", daemon=True).start()

    def relay(self, turn: LiveTurn, chat: str) -> None:
        """The turn's answer into the chat as it is written; its confirmations with buttons."""
        reply = self._reply(chat)
        reply.typing()
        said = ""
        try:
            for event in turn.follow():
                kind = event.get("event")
                if kind == "token":
                    said += str(event.get("text") or "")
                    reply.grow(said)
                elif kind == "tool_call":
                    if said.strip():  # what was said before the call stays, the next words go in a new message
                        reply.finish(said)
                    reply, said = self._reply(chat), ""
                    reply.typing()
                elif kind == "confirmation":
                    self.send_confirmation(event, chat)
                elif kind in ("done", "stopped"):
                    reply.finish(str(event.get("content") or said))
                elif kind == "error":
                    reply.finish(f"{said}\n\n[The turn failed: {event.get('message')}]" if said.strip()
                                 else f"The turn failed: {event.get('message')}")
        except Exception:  # noqa: BLE001 - the thread keeps the answer; the web UI shows it
            log.exception("relaying the turn on %s to chat %s", turn.thread_id, chat)
        self.handled.turn_ended(turn.thread_id)
