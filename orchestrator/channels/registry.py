"""The channels Jarvis knows, by name: each backend's factory(settings) -> Channel, which raises ChannelError
saying how to configure it when it cannot be used."""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.core.config import Settings
from .base import Channel, ChannelError
from .email import email_channel
from .local import local_channel
from .telegram import TelegramChannel


def matrix_channel(settings: Settings) -> Channel:
    from .matrix_send import MatrixChannel  # matrix-nio is imported only where Matrix is used

    return MatrixChannel(settings)


FACTORIES: dict[str, Callable[[Settings], Channel]] = {
    "email": email_channel,
    "local": local_channel,
    "matrix": matrix_channel,
    "telegram": TelegramChannel,
}


def get_channel(settings: Settings, name: str) -> Channel:
    factory = FACTORIES.get(name)
    if factory is None:
        raise ChannelError(f"unknown channel {name!r}; known channels: {', '.join(known_channels())}")
    return factory(settings)


def known_channels() -> list[str]:
    return sorted(FACTORIES)
