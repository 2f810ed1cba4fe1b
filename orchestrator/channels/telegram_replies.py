"""Jarvis's answer written into a Telegram chat as a chat app user expects it: a typing indicator, the answer
shown as it is written (one message edited at most every `edit_every_s`, so the Bot API's per-chat limits are not
hit), and the final text split into messages of at most Telegram's 4096 characters.

Text is sent with parse_mode HTML, escaped here: what the model wrote is never read by Telegram as markup (a
`<b>` in an answer is shown as written, an `&` too). Escaping can lengthen text, so the split is made on the
escaped text, never inside an entity (`&amp;`), preferring a line break.
"""

from __future__ import annotations

import html
import logging
import time
from typing import Any, Protocol

log = logging.getLogger(__name__)

LIMIT = 4096  # the Bot API's longest message text


class BotCalls(Protocol):
    def call(self, method: str, payload: dict[str, Any] | None = None, timeout: float | None = None) -> Any: ...


def split_escaped(text: str, limit: int = LIMIT) -> list[str]:
    """`text` HTML-escaped and cut into pieces of at most `limit` characters, at a line break when one is in the
    piece's second half, never inside an entity."""
    escaped = html.escape(text, quote=False)
    pieces: list[str] = []
    while len(escaped) > limit:
        cut = escaped.rfind("\n", limit // 2, limit)
        if cut <= 0:
            cut = limit
            amp = escaped.rfind("&", cut - 8, cut)  # an entity is at most 5 characters here (&amp;)
            if amp != -1 and ";" not in escaped[amp:cut]:
                cut = amp
        pieces.append(escaped[:cut])
        escaped = escaped[cut:].lstrip("\n")
    if escaped or not pieces:
        pieces.append(escaped)
    return pieces


class Reply:
    """One answer in one chat: `grow(text)` as the words come (an edit at most every `edit_every_s`), `finish(text)`
    once it is whole."""

    def __init__(self, api: BotCalls, chat_id: str, edit_every_s: float = 1.0, limit: int = LIMIT):
        self.api = api
        self.chat_id = chat_id
        self.every = edit_every_s
        self.limit = limit
        self.message_id: int | None = None
        self.shown = ""  # the escaped text the streamed message shows now
        self.last_edit = 0.0

    def typing(self) -> None:
        try:
            self.api.call("sendChatAction", {"chat_id": self.chat_id, "action": "typing"})
        except Exception as exc:  # noqa: BLE001 - the answer comes all the same
            log.info("could not show Telegram's typing indicator: %s", exc)

    def send(self, text: str, **extra: Any) -> dict[str, Any]:
        """One new message of already escaped text."""
        return self.api.call("sendMessage", {"chat_id": self.chat_id, "text": text, "parse_mode": "HTML", **extra}) or {}

    def _show(self, escaped: str) -> None:
        if escaped == self.shown or not escaped.strip():
            return
        if self.message_id is None:
            self.message_id = int(self.send(escaped).get("message_id") or 0) or None
        else:
            self.api.call("editMessageText", {"chat_id": self.chat_id, "message_id": self.message_id, "text": escaped,
                                              "parse_mode": "HTML"})
        self.shown = escaped
        self.last_edit = time.monotonic()

    def grow(self, text: str) -> None:
        """The answer so far; shown when the last edit is old enough (the first words at once)."""
        if self.message_id is not None and time.monotonic() - self.last_edit < self.every:
            return
        first = split_escaped(text, self.limit)[0]
        try:
            self._show(first)
        except Exception as exc:  # noqa: BLE001 - a failed edit is made good by the next one, or by finish
            log.info("could not update the answer in Telegram chat %s: %s", self.chat_id, exc)

    def finish(self, text: str) -> None:
        """The whole answer: the streamed message shows its first piece, the rest follow as new messages."""
        pieces = split_escaped(text or "(no answer)", self.limit)
        self._show(pieces[0])
        for piece in pieces[1:]:
            self.send(piece)
