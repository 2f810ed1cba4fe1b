"""The channel interface and the registry of configured channels."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import Settings

log = logging.getLogger(__name__)


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


_FACTORIES: dict[str, Any] = {}


def register_channel(name: str, factory: Any) -> None:
    """factory(settings) -> Channel, or raises ChannelError saying how to configure it."""
    _FACTORIES[name] = factory


def get_channel(settings: Settings, name: str) -> Channel:
    if name not in _FACTORIES:
        _load_builtin()
    factory = _FACTORIES.get(name)
    if factory is None:
        known = ", ".join(sorted(_FACTORIES))
        raise ChannelError(f"unknown channel {name!r}; known channels: {known}")
    return factory(settings)


def known_channels() -> list[str]:
    _load_builtin()
    return sorted(_FACTORIES)


def _load_builtin() -> None:
    from . import email, local, telegram  # noqa: F401  (they register themselves)
