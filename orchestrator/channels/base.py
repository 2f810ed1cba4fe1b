"""The channel interface: what every backend implements (registry.py names the backends)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


# The longest inbound message kept (POST /api/inbound refuses longer ones): an email's body has no limit of ours
# (Gmail allows tens of MB), and all of it went into the database, the switchboard and the jorb's prompt.
MAX_INBOUND_CHARS = 100_000


def bounded_inbound(text: str) -> str:
    if len(text) <= MAX_INBOUND_CHARS:
        return text
    return (text[:MAX_INBOUND_CHARS] + f"\n[... the message went on for {len(text) - MAX_INBOUND_CHARS} more characters, "
            "not kept]")


class ChannelError(Exception):
    """Sending failed or the channel is not usable; the message says what to do."""


class FileTooLarge(ChannelError):
    """A file a user sent, past the limit: said before its download (the size the channel declares) or while it
    streams (a declared size is the sender's word, not a bound)."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"the file is larger than {limit // (1024 * 1024)} MB")
        self.size, self.limit = size, limit


@dataclass
class Sent:
    channel: str
    to: str
    external_id: str | None = None
    thread_key: str | None = None


class Channel(Protocol):
    name: str

    def send(self, to: str, text: str, *, thread_key: str | None = None) -> Sent: ...
