"""The channel interface: what every backend implements (registry.py names the backends)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ChannelError(Exception):
    """Sending failed or the channel is not usable; the message says what to do."""


@dataclass
class Sent:
    channel: str
    to: str
    external_id: str | None = None
    thread_key: str | None = None


class Channel(Protocol):
    name: str

    def send(self, to: str, text: str, *, thread_key: str | None = None) -> Sent: ...
