"""Files and voice messages the user sends in their room with the bot (conversations/matrix.py): which part of a
Matrix message event is the file, and how it is fetched (its mxc:// URI from the homeserver: channels/matrix.
MatrixAPI.download, which counts what streams). What is done with it is the same on every channel
(conversations/files.py: a document is an upload that taints the thread, a voice message is transcribed).

Taken: `m.file` (a PDF or a text document, as the web UI's uploads are) and `m.audio` (a voice message,
`org.matrix.msc3245.voice`, or any recording: transcribed). The size the event declares (`info.size`) is the
sender's word: checked before the download, and what streams is counted against the same bound. A file sent
end-to-end encrypted (its `file` object, in place of `url`) is refused with why, never fetched: the keys to it are
not read (channels/matrix.py: no end-to-end encryption). An image, a video, a location are refused, said so.

A file's name and its caption: a `filename` different from `body` makes the body the user's words (the spec's
media captions); otherwise the body is only the file's name, never read as the user's words.
"""

from __future__ import annotations

from typing import Any

from orchestrator.channels.matrix import MatrixAPI
from orchestrator.core.config import Settings
from .files import Received, Refused, Source, document, voice

MATRIX = Source("Matrix")
NOT_TAKEN = ("Only files (a PDF or a text file) and voice messages are taken over Matrix; this one was not read. "
             "Send it as a file, or type your request.")
ENCRYPTED = ("That file was sent end-to-end encrypted, and Jarvis cannot decrypt files: it was not read and nothing "
             "was done. Send it in a room without encryption, or drop it in the web UI.")
NO_URL = "That message names no file on the homeserver; nothing was done."

__all__ = ["Received", "Refused", "is_file", "received"]


def is_file(content: dict[str, Any]) -> bool:
    """A message event that is not text: a file, a recording, an image..."""
    return content.get("msgtype") not in ("m.text", "m.notice", "m.emote") or not isinstance(content.get("body"), str)


def received(settings: Settings, api: MatrixAPI, content: dict[str, Any]) -> Received:
    """The event's file or recording as a message for the planner; Refused saying why when it is not taken."""
    kind = content.get("msgtype")
    if kind not in ("m.file", "m.audio"):
        raise Refused(NOT_TAKEN)
    if "file" in content:
        raise Refused(ENCRYPTED)
    url = content.get("url")
    if not isinstance(url, str) or not url:
        raise Refused(NO_URL)
    info = content.get("info")
    size = info.get("size") if isinstance(info, dict) else None
    declared = size if isinstance(size, int) else 0

    def fetch(limit: int, sink: Any) -> int:
        return api.download(url, limit, sink)

    if kind == "m.audio":
        return voice(settings, MATRIX, declared, fetch)
    body, filename = content.get("body"), content.get("filename")
    body = body if isinstance(body, str) else ""
    if isinstance(filename, str) and filename:
        return document(settings, MATRIX, filename, declared, fetch, body if body != filename else None)
    return document(settings, MATRIX, body, declared, fetch, None)
