"""Files and voice messages the user sends in their private chat with the bot (conversations/telegram.py): which
part of a Telegram message is the file, and how it is fetched (getFile, then the download: channels/telegram.
TelegramAPI.download, which checks getFile's size and counts what streams). What is done with it is the same on
every channel (conversations/files.py: a document is an upload that taints the thread, a voice message is
transcribed). The Bot API gives bots files of at most 20 MB.
"""

from __future__ import annotations

from typing import Any

from orchestrator.channels.telegram import TelegramAPI
from orchestrator.core.config import Settings
from .files import Received, Refused, Source, document, voice

TELEGRAM = Source("Telegram", cap_mb=20, cap_said="the Bot API's")  # the largest file the Bot API lets a bot download
NOT_TAKEN = ("Only documents (a PDF or a text file) and voice messages are taken over Telegram; this one was not "
             "read. Send the file as a document, or type your request.")

__all__ = ["Received", "Refused", "received"]


def _declared(item: dict[str, Any]) -> int:
    size = item.get("file_size")
    return size if isinstance(size, int) else 0


def received(settings: Settings, api: TelegramAPI, message: dict[str, Any]) -> Received:
    """The message's file or voice as a message for the planner; Refused saying why when it is not taken."""
    heard = message.get("voice") or message.get("audio")
    if isinstance(heard, dict):
        return voice(settings, TELEGRAM, _declared(heard),
                     lambda limit, sink: api.download(str(heard.get("file_id")), limit, sink))
    item = message.get("document")
    if isinstance(item, dict):
        caption = message.get("caption")
        return document(settings, TELEGRAM, str(item.get("file_name") or "document"), _declared(item),
                        lambda limit, sink: api.download(str(item.get("file_id")), limit, sink),
                        caption if isinstance(caption, str) else None)
    raise Refused(NOT_TAKEN)
