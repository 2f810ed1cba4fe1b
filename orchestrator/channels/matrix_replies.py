"""Jarvis's answer written into a Matrix room as a chat app user expects it: a typing notification, the answer shown
as it is written (one message replaced by `m.replace` edits, at most one every `edit_every_s`), and the final text
split into messages of at most LIMIT characters (a Matrix event is at most 64 KiB, and an edit carries the text
twice).

Text is sent as `org.matrix.custom.html` built here from the escaped text (line breaks only): what the model wrote
is never read by a client as markup (a `<b>` or an `<img src=...>` in an answer is shown as written), and the plain
`body` is the text itself. The split is the Telegram replies' (split_escaped), never inside an entity.
"""

from __future__ import annotations

import html
import logging
import time
from typing import Any, Protocol

from .telegram_replies import split_escaped

log = logging.getLogger(__name__)

LIMIT = 4000  # characters of one message: with the edit's copy, well under an event's 64 KiB in any script


class RoomCalls(Protocol):
    def send(self, room: str, content: dict[str, Any], kind: str = "m.room.message") -> str: ...

    def soon(self, name: str, *args: Any, **kwargs: Any) -> None: ...


def content_of(escaped: str) -> dict[str, Any]:
    """A text message of already escaped text: the plain body and its HTML."""
    return {"msgtype": "m.text", "body": html.unescape(escaped), "format": "org.matrix.custom.html",
            "formatted_body": escaped.replace("\n", "<br>")}


class MatrixReply:
    """One answer in one room: `grow(text)` as the words come, `finish(text)` once it is whole."""

    def __init__(self, api: RoomCalls, room: str, edit_every_s: float = 1.0, limit: int = LIMIT):
        self.api = api
        self.room = room
        self.every = edit_every_s
        self.limit = limit
        self.event_id: str | None = None
        self.shown = ""
        self.last_edit = 0.0

    def typing(self, on: bool = True) -> None:
        """Sent without waiting: the answer comes all the same, and its first words do not wait for this."""
        self.api.soon("room_typing", self.room, on)

    def send(self, escaped: str) -> str:
        return self.api.send(self.room, content_of(escaped))

    def _show(self, escaped: str) -> None:
        if escaped == self.shown or not escaped.strip():
            return
        if self.event_id is None:
            self.event_id = self.send(escaped)
        else:
            new = content_of(escaped)
            self.api.send(self.room, {"msgtype": "m.text", "body": f"* {new['body']}", "m.new_content": new,
                                      "m.relates_to": {"rel_type": "m.replace", "event_id": self.event_id}})
        self.shown = escaped
        self.last_edit = time.monotonic()

    def grow(self, text: str) -> None:
        """The answer so far; shown when the last edit is old enough (the first words at once)."""
        if self.event_id is not None and time.monotonic() - self.last_edit < self.every:
            return
        try:
            self._show(split_escaped(text, self.limit)[0])
        except Exception as exc:  # noqa: BLE001 - a failed edit is made good by the next one, or by finish
            log.info("could not update the answer in Matrix room %s: %s", self.room, exc)

    def finish(self, text: str) -> None:
        """The whole answer: the streamed message shows its first piece, the rest follow as new messages."""
        pieces = split_escaped(text or "(no answer)", self.limit)
        self._show(pieces[0])
        for piece in pieces[1:]:
            self.send(piece)
        self.typing(False)
