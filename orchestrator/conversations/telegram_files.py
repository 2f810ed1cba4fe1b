"""Files and voice messages the user sends in their private chat with the bot (conversations/telegram.py).

A document is handled as a file dropped on the web UI is (chat/uploads.py: the same writer, its checks of type and
size, its record): an attachment of the thread, outside content, so the thread is tainted from that turn on and a
later effect asks (chat/state.names_outside). Its name is its maker's: stored cleaned (uploads.safe_name), never
read as the user's words; the user's words are the caption, or "I attached 1 file." (uploads.attached_words).

A voice message is transcribed with Jarvis's speech-to-text (orchestrator/voice: the configured engine, its bounds
on size and duration) and what was heard is the user's message; the chat is told what was heard first, so a
misheard request is seen before its answer.

Sizes are checked before anything is fetched (the message's and getFile's file_size) and while the download
streams (a file that said it was small and is not): channels/telegram.TelegramAPI.download. The Bot API gives
bots files of at most 20 MB; the smaller of that and `server.max_upload_mb` (a document) or `voice.max_audio_mb`
(a voice message) bounds each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.channels.base import ChannelError
from orchestrator.channels.telegram import FileTooLarge, TelegramAPI
from orchestrator.chat.uploads import UploadError, UploadWriter, attached_words, max_bytes
from orchestrator.core.config import Settings
from orchestrator.voice import VoiceError, transcribe

MB = 1024 * 1024
BOT_API_DOWNLOAD_MB = 20  # the largest file the Bot API lets a bot download
NOT_TAKEN = ("Only documents (a PDF or a text file) and voice messages are taken over Telegram; this one was not "
             "read. Send the file as a document, or type your request.")


class Refused(Exception):
    """What to tell the user about a file that was not taken (nothing else was done)."""


@dataclass
class Received:
    text: str  # the user's message: the caption, what was heard, or attached_words
    attachments: list[dict[str, Any]]  # new attachments (state.attachments entries)
    heard: str | None = None  # a voice message's transcript


def received(settings: Settings, api: TelegramAPI, message: dict[str, Any]) -> Received:
    """The message's file or voice as a message for the planner; Refused saying why when it is not taken."""
    voice = message.get("voice") or message.get("audio")
    if isinstance(voice, dict):
        return _voice(settings, api, voice)
    document = message.get("document")
    if isinstance(document, dict):
        return _document(settings, api, document, message.get("caption"))
    raise Refused(NOT_TAKEN)


def _limit(mb: int) -> int:
    return min(mb * MB, BOT_API_DOWNLOAD_MB * MB)


def _too_large(limit: int, what: str, setting: str) -> Refused:
    return Refused(f"That {what} is larger than {limit // MB} MB ({setting}, and the Bot API's {BOT_API_DOWNLOAD_MB} "
                   "MB); it was not read and nothing was done.")


def _declared(item: dict[str, Any]) -> int:
    size = item.get("file_size")
    return size if isinstance(size, int) else 0


def _document(settings: Settings, api: TelegramAPI, document: dict[str, Any], caption: Any) -> Received:
    limit = min(max_bytes(settings), BOT_API_DOWNLOAD_MB * MB)
    if _declared(document) > limit:
        raise _too_large(limit, "file", "server.max_upload_mb")
    try:
        writer = UploadWriter(settings, str(document.get("file_name") or "document"))
    except UploadError as exc:
        raise Refused(f"{exc}; it was not read and nothing was done.") from None
    try:
        api.download(str(document.get("file_id")), limit, writer.write)
        stored = writer.finish()
    except FileTooLarge:
        writer.abort()
        raise _too_large(limit, "file", "server.max_upload_mb") from None
    except UploadError as exc:
        writer.abort()
        raise Refused(f"{exc}; it was not read and nothing was done.") from None
    except ChannelError as exc:
        writer.abort()
        raise Refused(f"The file could not be fetched from Telegram ({exc}); send it again.") from None
    new = [stored.attachment()]
    words = caption.strip() if isinstance(caption, str) else ""
    return Received(text=words or attached_words(new), attachments=new)


def _voice(settings: Settings, api: TelegramAPI, voice: dict[str, Any]) -> Received:
    limit = _limit(settings.voice.max_audio_mb)
    if _declared(voice) > limit:
        raise _too_large(limit, "voice message", "voice.max_audio_mb")
    audio = bytearray()
    try:
        api.download(str(voice.get("file_id")), limit, audio.extend)
    except FileTooLarge:
        raise _too_large(limit, "voice message", "voice.max_audio_mb") from None
    except ChannelError as exc:
        raise Refused(f"The voice message could not be fetched from Telegram ({exc}); send it again.") from None
    try:
        heard = transcribe(settings, bytes(audio)).text
    except VoiceError as exc:
        raise Refused(f"I could not use that voice message: {exc}") from None
    return Received(text=heard, attachments=[], heard=heard)
