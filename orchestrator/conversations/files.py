"""Files and voice messages the user sends over a chat channel (Telegram, Matrix), whatever the channel: the part
of receiving them that does not depend on how the channel names and fetches a file.

A document is handled as a file dropped on the web UI is (chat/uploads.py: the same writer, its checks of type and
size, its record): an attachment of the thread, outside content, so the thread is tainted from that turn on and a
later effect asks (chat/state.names_outside). Its name is its maker's: stored cleaned (uploads.safe_name), never
read as the user's words; the user's words are the caption, or "I attached 1 file." (uploads.attached_words).

A voice message is transcribed with Jarvis's speech-to-text (orchestrator/voice: the configured engine, its bounds
on size and duration) and what was heard is the user's message; the chat is told what was heard first, so a
misheard request is seen before its answer.

Sizes: the size the message declares is checked before anything is fetched, and the channel's `Fetch` counts what
streams and stops past the same bound (a file that said it was small and is not: FileTooLarge). The bound is
`server.max_upload_mb` (a document) or `voice.max_audio_mb` (a voice message), and the channel's own, if smaller
(`Cap`: the Bot API gives bots files of at most 20 MB).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from orchestrator.channels.base import ChannelError, FileTooLarge
from orchestrator.chat.uploads import UploadError, UploadWriter, attached_words, max_bytes
from orchestrator.core.config import Settings
from orchestrator.voice import VoiceError, transcribe

MB = 1024 * 1024

# Fetches the file into the sink, chunk by chunk, at most `limit` bytes (FileTooLarge past it, ChannelError when
# it cannot be fetched).
Fetch = Callable[[int, Callable[[bytes], None]], Any]


class Refused(Exception):
    """What to tell the user about a file that was not taken (nothing else was done)."""


@dataclass
class Received:
    text: str  # the user's message: the caption, what was heard, or attached_words
    attachments: list[dict[str, Any]]  # new attachments (state.attachments entries)
    heard: str | None = None  # a voice message's transcript


@dataclass(frozen=True)
class Source:
    """The channel the file came from: its name in what the user is told, and its own bound on a file's size
    (`cap_mb`, said as `cap_said`), if it has one."""

    name: str
    cap_mb: int | None = None
    cap_said: str = ""


def _limit(source: Source, limit: int) -> int:
    return min(limit, source.cap_mb * MB) if source.cap_mb else limit


def _too_large(source: Source, limit: int, what: str, setting: str) -> Refused:
    cap = f", and {source.cap_said} {source.cap_mb} MB" if source.cap_mb else ""
    return Refused(f"That {what} is larger than {limit // MB} MB ({setting}{cap}); it was not read and nothing was "
                   "done.")


def document(settings: Settings, source: Source, name: str, declared: int, fetch: Fetch,
             caption: str | None) -> Received:
    """A document as an upload of the thread; Refused saying why when it is not taken."""
    limit = _limit(source, max_bytes(settings))
    if declared > limit:
        raise _too_large(source, limit, "file", "server.max_upload_mb")
    try:
        writer = UploadWriter(settings, name or "document")
    except UploadError as exc:
        raise Refused(f"{exc}; it was not read and nothing was done.") from None
    try:
        fetch(limit, writer.write)
        stored = writer.finish()
    except FileTooLarge:
        writer.abort()
        raise _too_large(source, limit, "file", "server.max_upload_mb") from None
    except UploadError as exc:
        writer.abort()
        raise Refused(f"{exc}; it was not read and nothing was done.") from None
    except ChannelError as exc:
        writer.abort()
        raise Refused(f"The file could not be fetched from {source.name} ({exc}); send it again.") from None
    new = [stored.attachment()]
    words = caption.strip() if isinstance(caption, str) else ""
    return Received(text=words or attached_words(new), attachments=new)


def voice(settings: Settings, source: Source, declared: int, fetch: Fetch) -> Received:
    """A voice message as what was heard in it; Refused saying why when it is not taken."""
    limit = _limit(source, settings.voice.max_audio_mb * MB)
    if declared > limit:
        raise _too_large(source, limit, "voice message", "voice.max_audio_mb")
    audio = bytearray()
    try:
        fetch(limit, audio.extend)
    except FileTooLarge:
        raise _too_large(source, limit, "voice message", "voice.max_audio_mb") from None
    except ChannelError as exc:
        raise Refused(f"The voice message could not be fetched from {source.name} ({exc}); send it again.") from None
    try:
        heard = transcribe(settings, bytes(audio)).text
    except VoiceError as exc:
        raise Refused(f"I could not use that voice message: {exc}") from None
    return Received(text=heard, attachments=[], heard=heard)
