"""Answers from the phone: a Telegram button press or an email reply -> the pending item's answer, applied once.

Who may answer: on Telegram only `confirmations.notify.telegram_user_id` or a `telegram:<id>` of
channels.user_identities (ids Telegram authenticates; anyone else's press is dropped without a word, so a stranger learns nothing); by email only a reply from
`confirmations.notify.email` whose From: Gmail verified (channels.email.sender_verified), whose first word is
approve or deny and which quotes the code (one code: a reply quoting two known codes answers neither). What is
answered: the token names one question (tools.answers.item_ref: the call's key, tool and arguments hash); it is good
while that question is still pending, once, and only from the message it was sent in (the Telegram chat and message
whose button was pressed, the email thread replied in): its data pressed under another message, or its code quoted
in the reply to another email, answers nothing. The first answer of
any surface wins (JorbService, chat.answering record it); the later ones are told "already answered". A jorb's
and a chat thread's confirmations alike: the answer goes the way the UI's does (App.answer_item).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.channels.addresses import mailbox_of
from orchestrator.channels.email import email_channel
from orchestrator.channels.inbound import InboundMessage
from orchestrator.channels.telegram import lazy_bot_api
from orchestrator.core.config import Settings
from orchestrator.core.secrets import redact
from orchestrator.core.visible import visible
from .notifier import APPROVE, DENY, aware
from .store import ApprovalStore, ApprovalTokenRow, token_hash

log = logging.getLogger(__name__)

CODE = re.compile(r"\b[A-Z2-7]{24}\b")  # store.new_token: 15 bytes in base32
# (thread_id, interrupt_id, "approve"|"deny", via, the question's ref) -> applies it
Answer = Callable[[str, str, str, str, str], Any]


UNKNOWN = "That code is not known (it may be for another message); nothing was done."


class Busy(Exception):
    """The item's work is running right now: the answer was not applied and may be given again."""


@dataclass
class Outcome:
    text: str  # what the person who answered is told
    applied: bool = False
    closed: bool = False  # the question is settled: take the buttons off

    def __post_init__(self) -> None:
        # it leaves the machine (a Telegram toast, an email) and quotes the call's summary or an error: known
        # secrets masked, as the question itself was (notifier.describe)
        self.text = visible(redact(self.text))


def same_mailbox(a: str, b: str) -> bool:
    """Whether two addresses reach one mailbox: case aside, a `+tag` aside, and on gmail.com the dots of the
    local part aside (Gmail ignores them)."""
    def key(address: str) -> tuple[str, str]:
        local, _, domain = (mailbox_of(address) or address).strip().lower().rpartition("@")
        local = local.split("+", 1)[0]
        domain = "gmail.com" if domain == "googlemail.com" else domain
        return (local.replace(".", "") if domain == "gmail.com" else local), domain
    return key(a) == key(b)


def own_account_problem(account: str, address: str | None) -> str | None:
    """Why email answers cannot work when confirmations.notify.email is the Gmail account Jarvis reads: a reply
    from it is the account's own sent mail, which the poller leaves alone (it must: Jarvis's own sending tools
    could otherwise answer a question with the code they can read in that mailbox)."""
    if not address or not account or not same_mailbox(account, address):
        return None
    return (f"confirmations.notify.email ({address}) is the Gmail account Jarvis reads ({account}): your reply "
            "would be that account's own mail, which Jarvis never takes as an answer, so no email approval could "
            "ever be answered. Set confirmations.notify.email to another address of yours (the one on your phone).")


def telegram_principals(settings: Settings) -> set[int]:
    """The Telegram accounts (numeric ids, as Telegram authenticates them) whose presses are the user's: the one
    confirmations are sent to, and each `telegram:<id>` of channels.user_identities (a @handle there is not one:
    it can change hands)."""
    ids = {settings.confirmations.notify.telegram_user_id} - {None}
    for identity in settings.channels.user_identities:
        kind, _, number = identity.strip().lower().partition(":")
        if kind == "telegram" and number.isdigit():
            ids.add(int(number))
    return {int(i) for i in ids if i is not None}


class RemoteAnswers:
    """`pending(thread_id)`: that thread's pending items (App.pending); `answer`: applies an answer (App.answer_item),
    raising store.AlreadyAnswered-like errors whose message is told to the user, or Busy."""

    telegram = lazy_bot_api()

    def __init__(self, settings: Settings, pending: Callable[[str], list[dict[str, Any]]], answer: Answer,
                 store: ApprovalStore | None = None):
        self.settings = settings
        self.cfg = settings.confirmations.notify
        self.pending = pending
        self.answer = answer
        self.store = store or ApprovalStore(settings)

    # -- one token, from any channel ----------------------------------------------------------------------------
    def use(self, token: str, channel: str, answer: str, *, sent_to: str | None = None,
            message: str | None = None) -> Outcome:
        """`sent_to`, `message`: where the answer came from (the Telegram chat and message pressed, the email
        thread replied in): a token answers only from the message it was sent in."""
        row = self.store.token(token)
        if row is None or row.channel != channel or not self._from_its_message(row, sent_to, message):
            return Outcome(UNKNOWN)
        if row.used_at is not None:
            return Outcome(self._already(row), closed=True)
        item = next((p for p in self.pending(row.thread_id) if p.get("interrupt_id") == row.interrupt_id
                     and self.store.ref(p) == row.ref), None)
        if item is None:
            self.store.use_token(token_hash(token), "closed")
            return Outcome(self._already(row), closed=True)
        if not self.store.use_token(token_hash(token), answer):
            return Outcome(self._already(row), closed=True)
        try:
            self.answer(row.thread_id, row.interrupt_id, answer, channel, row.ref)
        except Busy as exc:
            self.store.unuse_token(token_hash(token))  # not applied: the same button can be pressed again
            return Outcome(f"{exc}; try again in a moment.")
        except Exception as exc:  # noqa: BLE001 - answered elsewhere first, moved on: said to the user
            return Outcome(str(exc), closed=True)
        done = "Approved" if answer == "approve" else "Denied"
        return Outcome(f"{done}: {item.get('summary') or item.get('tool')}", applied=True, closed=True)

    @staticmethod
    def _from_its_message(row: ApprovalTokenRow, sent_to: str | None, message: str | None) -> bool:
        """The token's own message: its chat (Telegram) and its message id or email thread. A row whose message id
        was never stored (the process died between sending and storing it) is matched by its chat alone."""
        if sent_to is not None and sent_to != row.sent_to:
            return False
        return row.message_id is None or row.message_id == message

    def _already(self, row: ApprovalTokenRow) -> str:
        first = self.store.answered(row.ref)
        return first.describe() if first else "already answered, or no longer waiting; nothing was done"

    # -- Telegram ---------------------------------------------------------------------------------------------
    def on_callback(self, query: dict[str, Any]) -> Outcome | None:
        """A button press (a Bot API callback_query). None: not the principal's, dropped without an answer."""
        sender = (query.get("from") or {}).get("id")
        if not isinstance(sender, int) or sender not in telegram_principals(self.settings):
            log.warning("a Telegram button press from user %s ignored: only confirmations.notify.telegram_user_id "
                        "or a telegram:<id> of channels.user_identities answers", sender)
            return None
        action, _, token = str(query.get("data") or "").partition(":")
        if action not in (APPROVE, DENY) or not token:
            outcome = Outcome("That button is not one of Jarvis's; nothing was done.")
        else:
            message = query.get("message") or {}  # absent for an inline message: not one Jarvis sent
            chat = (message.get("chat") or {}).get("id") if isinstance(message, dict) else None
            outcome = self.use(token, "telegram", "approve" if action == APPROVE else "deny",
                               sent_to="" if chat is None else str(chat),
                               message=str(message.get("message_id")) if isinstance(message, dict) else None)
        self.telegram.call("answerCallbackQuery", {"callback_query_id": query.get("id"), "text": outcome.text[:190],
                                                   "show_alert": not outcome.applied})
        message = query.get("message") or {}
        if outcome.closed and message.get("message_id") and (message.get("chat") or {}).get("id") is not None:
            try:
                self.telegram.call("editMessageReplyMarkup", {"chat_id": message["chat"]["id"],
                                                              "message_id": message["message_id"],
                                                              "reply_markup": {"inline_keyboard": []}})
            except Exception as exc:  # noqa: BLE001 - the answer stands without the edit
                log.info("could not take the buttons off Telegram message %s: %s", message.get("message_id"), exc)
        return outcome

    # -- email ------------------------------------------------------------------------------------------------
    def on_email(self, message: InboundMessage) -> Outcome | None:
        """A reply in a thread an approval was sent in (the EmailPoller's deliver). None: not from the principal as
        Gmail verified it, or not an answer; dropped."""
        sender, text = message.sender, message.text
        address = mailbox_of(sender)
        if not self.cfg.email or address != self.cfg.email.lower() or not message.verified:
            log.warning("an email answer from %s ignored: only a reply Gmail verified as from "
                        "confirmations.notify.email answers", sender)
            return None
        words = text.split()
        first = re.sub(r"[^a-z]", "", words[0].lower()) if words else ""
        codes = list(dict.fromkeys(CODE.findall(text.upper())))
        known = [c for c in codes if self.store.token(c) is not None] or codes[:1]
        if first not in ("approve", "deny") or not codes:
            outcome = Outcome('Not understood: reply with "approve" or "deny" as the first word, keeping the code '
                              "in the reply. Nothing was done.")
        elif len(known) > 1:  # which one the first word is for cannot be told: none is answered
            outcome = Outcome("The reply quotes more than one code: answer each message by replying to it, with its "
                              "own code only. Nothing was done.")
        else:
            outcome = self.use(known[0], "email", first, message=str(message.thread_key))
        try:
            email_channel(self.settings).send(self.cfg.email, outcome.text, thread_key=message.thread_key)
        except Exception as exc:  # noqa: BLE001 - the answer stands without the acknowledgement
            log.info("could not acknowledge the email answer: %s", exc)
        return outcome

    def email_threads(self) -> list[tuple[str, Any]]:
        """The Gmail threads approvals were sent in and not answered yet, with when (for EmailPoller)."""
        return [(row.message_id, aware(row.sent_at)) for row in self.store.open_tokens("email") if row.message_id]
