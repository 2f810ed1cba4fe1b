"""The user's own conversation with Jarvis over Matrix: a message the user writes in a room where only they and
Jarvis's bot account are members is a chat turn, on the same graph, planner, tools, policy and taint as the web
UI's (the App's TurnHub), one thread per room until `/new`. The commands, the threads of a room and the relay of a
turn's answer are the Telegram conversation's (conversations/telegram.py); what differs is who, where and how an
answer to a confirmation is given.

Who: the user is a `matrix:@you:server` of channels.user_identities, matched against the event's sender as the
homeserver authenticated it (what a message says about its author, its display name, is never read). The bot joins
a room when the user invites it (also an invite sent while Jarvis was stopped: channels/matrix.py) and declines
anyone else's invite; it talks only in a room whose joined members are the user and itself, checked at each
message, so a stranger invited into the room later makes the room silent. A stranger's event starts no turn,
reaches no model and gets no answer.

Once: each event is claimed under its event id in the database before anything is done with it, so an event synced
twice (a restart before the sync token was kept) is handled once. An edit (`m.replace`) of a message already
answered starts nothing. A flood is refused past `chat_per_minute`, a message longer than the channel's limit
(`max_message_chars`) is refused with why. A file (a PDF, a text document) is taken as a file dropped on the web UI
is (outside content: the thread is tainted), a voice message is transcribed and what was heard is the message
(conversations/matrix_files.py); an image, a video, a file sent encrypted are refused, said so.
An encrypted room is refused, said so: end-to-end encryption is not supported (channels/matrix.py).

Confirmations: sent into the room as a message carrying the one-time code of approvals/store.py; answered in place by
a reply to that message ("approve" or "deny") or a reaction (👍 / 👎) on it, through the same approvals as every
surface (approvals/remote.RemoteAnswers.use: the first answer wins, the code answers only from the message it was
sent in, which is read back from the homeserver: only a message the bot itself sent carries a code that counts).
"""

from __future__ import annotations

import hashlib
import html
import logging
from collections.abc import Callable
from typing import Any

from orchestrator.approvals.notifier import describe
from orchestrator.approvals.remote import CODE, UNKNOWN, RemoteAnswers
from orchestrator.approvals.store import ApprovalStore
from orchestrator.channels.matrix import MatrixAPI
from orchestrator.channels.matrix_replies import MatrixReply
from orchestrator.channels.inbound import InboundMessage
from orchestrator.channels.models import ChannelState
from orchestrator.core.config import Settings
from orchestrator.core.secrets import redact
from orchestrator.core.visible import visible
from orchestrator.jorbs.router import route_inbound
from orchestrator.jorbs.store import JorbStore
from orchestrator.chat.live_turns import TurnHub
from .email import own_words
from .matrix_files import is_file, received
from .flood import Flood
from .once import Handled
from .telegram import TelegramChat

log = logging.getLogger(__name__)

TOO_LONG = ("That message is longer than Jarvis takes over Matrix ({} characters, channels.matrix.max_message_chars); "
            "it was not read. Send a shorter one, or put the text in a file in the web UI.")
ENCRYPTED = ("This room is end-to-end encrypted, and Jarvis cannot read encrypted rooms yet: nothing was read. Invite "
             "it to a room without encryption (it can be turned on only when the room is made).")
HOW_TO_ANSWER = "Reply to this message with approve or deny, or react to it with 👍 or 👎."
APPROVE_KEYS = {"👍", "👍️", "✅", "✔️"}
DENY_KEYS = {"👎", "👎️", "❌", "✖️"}


class MatrixChat(TelegramChat):
    """`hub`: the App's TurnHub; `pending(thread_id=None)`: App.pending; `answers`: the App's RemoteAnswers."""

    def __init__(self, settings: Settings, hub: TurnHub, pending: Callable[..., list[dict[str, Any]]],
                 answers: RemoteAnswers, api: MatrixAPI):
        self.settings = settings
        self.cfg = settings.channels.matrix  # type: ignore[assignment]  # edit_every_s is all the relay reads
        self.hub = hub
        self.pending = pending
        self.answers = answers
        self.api = api
        self.me = api.user_id
        self.state = ChannelState(settings, "matrix")
        self.handled = Handled(self.state)
        self.jorbs = JorbStore(settings)
        self.approvals = ApprovalStore(settings)
        self.flood = Flood("matrix", settings.data_dir, self.cfg.chat_per_minute)
        self.send_confirmation = self._confirm
        hub.watchers.append(self._watch)

    # -- who --------------------------------------------------------------------------------------------------
    def is_user(self, sender: str | None, text: str = "", room: str = "") -> bool:
        if not sender:
            return False
        route = route_inbound(self.settings, self.jorbs, None,
                              InboundMessage("matrix", f"matrix:{sender}", text, thread_key=room,
                                             sender_id=f"matrix:{sender}"),
                              use_model=False)
        return route.is_user and route.jorb_id is None

    def invited(self, room: str, inviter: str | None) -> None:
        """An invite to the bot: joined when the user sent it, declined otherwise (also an encrypted room, with why)."""
        if not self.is_user(inviter):
            log.info("matrix invite to %s from %s declined: not a matrix: identity of channels.user_identities",
                     room, inviter)
            self.api.call("room_leave", room)
            return
        self.api.call("join", room)
        if self.api.encrypted(room):
            self._say(room, ENCRYPTED)
            self.api.call("room_leave", room)
            return
        log.info("joined matrix room %s, invited by %s", room, inviter)

    # -- in ---------------------------------------------------------------------------------------------------
    def take(self, room: str, event: dict[str, Any]) -> bool:  # type: ignore[override]
        """The sync loop's hand: True when the event was the user's own conversation (handled, or refused with
        why), False when it was not (a stranger's, a room with others in it, not a message)."""
        sender, kind = event.get("sender"), event.get("type")
        if kind not in ("m.room.message", "m.reaction", "m.room.encrypted") or not self.is_user(sender, room=room):
            return False
        if self.api.members(room) != {self.me, sender}:
            log.info("matrix event in %s ignored: Jarvis talks only in a room of you and itself", room)
            return False
        content = event.get("content") or {}
        key = Handled.key(room, event.get("event_id"))
        if not self.handled.receive(key, str(content.get("body") or kind)):
            log.info("matrix event %s was already taken: not again", event.get("event_id"))
            return True
        relates = content.get("m.relates_to") or {}
        started = False
        if kind == "m.room.encrypted":
            self._say(room, ENCRYPTED)
        elif kind == "m.reaction":
            emoji = str(relates.get("key") or "")
            if relates.get("rel_type") == "m.annotation" and emoji in APPROVE_KEYS | DENY_KEYS:
                self._answer(room, str(relates.get("event_id")), "approve" if emoji in APPROVE_KEYS else "deny")
        elif relates.get("rel_type") == "m.replace":
            log.info("matrix message %s edited: an edit is not a new message", relates.get("event_id"))
        else:
            started = self._message(room, content, (relates.get("m.in_reply_to") or {}).get("event_id"), key)
        if not started:
            self.handled.done(key)
        return True

    def _message(self, room: str, content: dict[str, Any], reply_to: str | None, key: str) -> bool:
        """True when a turn started for the message (its record is then ended by the relay)."""
        body = content.get("body")
        text = body if isinstance(body, str) else ""
        if reply_to and not is_file(content):
            first = (own_words(text).split() or [""])[0].strip(".,!").lower()
            if first in ("approve", "deny"):
                self._answer(room, reply_to, first)
                return False
        if self.flood.over(room, lambda notice: self._say(room, notice)):
            return False
        if len(text) > self.cfg.max_message_chars:
            self._say(room, TOO_LONG.format(self.cfg.max_message_chars))
            return False
        new = None
        if is_file(content):
            handed = self._file_taken(room, lambda: received(self.settings, self.api, content))
            if handed is None:
                return False
            text, new = handed.text, handed.attachments
        elif text.strip().startswith("/"):
            self._command(room, text.strip().split(maxsplit=1)[0].lower())
            return False
        return self._start(room, text, new, key)

    # -- confirmations ----------------------------------------------------------------------------------------
    def _confirm(self, item: dict[str, Any], room: str) -> None:
        """A confirmation of this room's conversation, sent into the room at once and only there (marked as sent,
        so the notifier's sweep does not send it again), carrying its one-time code."""
        ref = self.approvals.ref(item)
        self.approvals.seen(ref)
        if not self.approvals.mark_notified(ref):
            return
        token, digest = self.approvals.issue(item, "matrix", room)
        text = f"{describe(item, self.settings.confirmations.notify.ui_url)}\n\n{HOW_TO_ANSWER} (code {token})"
        try:
            event_id = MatrixReply(self.api, room).send(html.escape(visible(redact(text)), quote=False))
        except Exception:
            self.approvals.withdraw(digest)
            raise
        self.approvals.sent(digest, event_id)

    def _answer(self, room: str, asked_in: str, answer: str) -> None:
        """An answer to the confirmation sent as event `asked_in`: its code read back from the homeserver, from a
        message the bot sent into this very room."""
        try:
            asked = self.api.event(room, asked_in)
        except Exception as exc:  # noqa: BLE001 - not an event of this room: no code
            log.info("matrix answer to %s in %s: %s", asked_in, room, exc)
            asked = {}
        code = CODE.search(str((asked.get("content") or {}).get("body") or "")) if asked.get("sender") == self.me else None
        outcome = self.answers.use(code.group(0), "matrix", answer, sent_to=room, message=asked_in) if code else None
        self._say(room, outcome.text if outcome else UNKNOWN)

    # -- the Telegram conversation's parts, made for Matrix ---------------------------------------------------
    def _thread_name(self, chat: str, number: int) -> str:
        # a room id (!opaque:server) is not made for a URL: the thread is named by its digest
        return f"matrix-{hashlib.sha256(chat.encode()).hexdigest()[:12]}-{number}"

    def _reply(self, chat: str) -> MatrixReply:
        return MatrixReply(self.api, chat, self.cfg.edit_every_s)
