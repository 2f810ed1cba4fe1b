"""Sending pending confirmations to the principal's phone (`confirmations.notify`): a confirmation (a jorb's, or
a chat thread's) that no UI session has looked at for `after_s` goes to Telegram (with Approve / Deny buttons)
and/or by email (answered by a reply), each carrying its own one-time token (store.py). Also takes the buttons off
messages whose item was answered elsewhere or moved on.

A chat thread held by a process (a `jarvis chat` prompt waiting for the answer in its terminal, a turn running) is
being watched: its confirmations are not sent while it is held. Several confirmations of one turn are sent one
message each; each answers its own call (chat/answering.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Mapping

from orchestrator.channels.base import ChannelError
from orchestrator.channels.email import email_channel
from orchestrator.channels.ratelimit import bucket
from orchestrator.channels.telegram import lazy_bot_api
from orchestrator.core.config import Settings
from orchestrator.core.ids import ConversationKind, conversation_of
from orchestrator.core.secrets import redact, redacted
from orchestrator.core.visible import shown_arguments, visible
from orchestrator.storage.claims import Claims
from orchestrator.storage.engines import utcnow
from .store import ApprovalStore

log = logging.getLogger(__name__)

APPROVE, DENY = "a", "d"  # callback data: "<a|d>:<token>", well under Telegram's 64 bytes


def aware(when: datetime | None) -> datetime | None:
    """SQLite gives stored times back without their zone; they were written in UTC."""
    return when.replace(tzinfo=timezone.utc) if when is not None and when.tzinfo is None else when


def describe(item: Mapping[str, Any], ui_url: str | None) -> str:
    """What the message says: the summary, the effects, why it asks, the exact call (known secrets masked)."""
    # masked before it is quoted and cut: a secret holding a quote or a backslash is escaped by the quoting, and
    # one across a cut loses its end, and neither is then found by the mask of the whole text below
    args = shown_arguments(redacted(item.get("args") or {}))
    jorb_id = conversation_of(str(item.get("thread_id"))).jorb_id
    where = f"jorb {jorb_id}" if jorb_id else f"conversation {item.get('thread_id')}"
    lines = [f"Jarvis asks before it acts ({where}):", str(item.get("summary") or item.get("tool")),
             f"Effects: {', '.join(item.get('side_effects') or []) or 'none'}", f"Why it asks: {item.get('reason')}",
             f"Call: {item.get('tool')} {args}"]
    if item.get("kind") == "in_doubt":
        lines.insert(1, "This call was started and cut off: it MAY HAVE HAPPENED. Approve runs it again.")
    if ui_url:
        page = f"jorbs/{jorb_id}" if jorb_id else f"chat/{item.get('thread_id')}"
        lines.append(f"To change the arguments, use the UI: {ui_url.rstrip('/')}/#{page}")
    # it leaves the machine: a known secret in the arguments is masked; shown on a phone, nothing in it may reorder
    # or hide the rest (core/visible.py)
    return visible(redact("\n".join(lines)))


class Notifier:
    """`sweep()` looks at what is pending (`pending()`: App.pending) and sends what is due."""

    telegram = lazy_bot_api()

    def __init__(self, settings: Settings, pending: Callable[[], list[dict[str, Any]]],
                 store: ApprovalStore | None = None):
        self.settings = settings
        self.cfg = settings.confirmations.notify
        self.pending = pending
        self.store = store or ApprovalStore(settings)
        self.claims = Claims(settings)

    def due(self, item: Mapping[str, Any], now: datetime) -> bool:
        if item.get("type") != "confirmation":
            return False
        if self.cfg.effects and not set(self.cfg.effects) & set(item.get("side_effects") or []):
            return False
        ref = self.store.ref(item)
        if self.store.answered(ref) is not None:
            return False  # answered; its step has not moved on yet
        first = aware(self.store.seen(ref).first_seen)
        now = max(now, first)  # seen for the first time just now
        viewed = aware(self.store.ui_seen_at(str(item["thread_id"])))
        waited = (now - first).total_seconds() >= self.cfg.after_s
        unwatched = viewed is None or (now - viewed).total_seconds() >= self.cfg.after_s
        if not (waited and unwatched):
            return False
        thread_id = str(item["thread_id"])
        return (conversation_of(thread_id).kind is ConversationKind.JORB
                or self.claims.holder(thread_id) is None)  # a held chat is watched

    def sweep(self) -> int:
        """Send every due item once (one worker of several sends it); returns how many were sent."""
        now = utcnow()
        items = self.pending()
        sent = 0
        for item in items:
            if not self.due(item, now) or not self.store.mark_notified(self.store.ref(item)):
                continue
            for channel in self.cfg.to:
                try:
                    (self.send_telegram if channel == "telegram" else self.send_email)(item)
                    sent += 1
                except Exception as exc:  # noqa: BLE001 - a channel down (TelegramRetry too) must not stop the others
                    log.warning("could not send confirmation %s by %s: %s", item.get("interrupt_id"), channel, exc)
        self.close_answered({self.store.ref(i) for i in items})
        return sent

    def send_telegram(self, item: Mapping[str, Any], chat: str | None = None) -> None:
        """`chat`: the private chat the question came up in (the user's conversation over Telegram), else the
        user's chat with the bot (a private chat's id is the user's id)."""
        chat = chat or str(self.cfg.telegram_user_id)
        token, digest = self.store.issue(item, "telegram", chat)
        markup = {"inline_keyboard": [[{"text": "Approve", "callback_data": f"{APPROVE}:{token}"},
                                       {"text": "Deny", "callback_data": f"{DENY}:{token}"}]]}
        try:
            if not bucket("telegram", self.settings.channels.send_per_minute).acquire(timeout=120):
                raise ChannelError("Telegram sending is rate limited (channels.send_per_minute)")
            result = self.telegram.call("sendMessage", {"chat_id": chat, "text": describe(item, self.cfg.ui_url),
                                                        "reply_markup": markup})
        except Exception:
            self.store.withdraw(digest)
            raise
        self.store.sent(digest, str((result or {}).get("message_id", "")))

    def send_email(self, item: Mapping[str, Any]) -> None:
        to = str(self.cfg.email)
        token, digest = self.store.issue(item, "email", to)
        # describe() masks known secrets; its first line, which becomes the Subject, names no argument
        text = (f"{describe(item, self.cfg.ui_url)}\n\n"
                f"Reply with \"approve\" or \"deny\" as the first word, keeping this code in the reply: {token}\n"
                "(only a reply from your own address, as Gmail verified it, is taken)")
        try:
            out = email_channel(self.settings).send(to, text)
        except Exception:
            self.store.withdraw(digest)
            raise
        self.store.sent(digest, out.thread_key)

    def close_answered(self, pending_refs: set[str]) -> None:
        """Tokens of an item no longer pending (answered elsewhere, moved on) are closed: its email thread is not
        polled any more, and the buttons are taken off its Telegram message."""
        for row in self.store.open_tokens():
            if row.ref in pending_refs or not row.message_id or not self.store.use_token(row.token_hash, "closed"):
                continue
            if row.channel != "telegram":
                continue
            try:
                self.telegram.call("editMessageReplyMarkup", {"chat_id": row.sent_to, "message_id": int(row.message_id),
                                                              "reply_markup": {"inline_keyboard": []}})
            except Exception as exc:  # noqa: BLE001 - the message may be gone; the token is closed either way
                log.info("could not take the buttons off Telegram message %s: %s", row.message_id, exc)
