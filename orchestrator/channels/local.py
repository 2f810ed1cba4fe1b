"""The `local` channel: messages stay on this machine. The UI and `jarvis inbox` show them; the user answers
as the counterpart (`jarvis jorbs reply`, POST /api/inbound). Useful for trying a jorb without any account."""

from __future__ import annotations

from orchestrator.core.config import Settings
from .base import ChannelError, Sent


class LocalChannel:
    name = "local"

    def send(self, to: str, text: str, *, thread_key: str | None = None) -> Sent:
        return Sent(channel=self.name, to=to, thread_key=thread_key)


def local_channel(settings: Settings) -> LocalChannel:
    if not settings.channels.local:
        raise ChannelError("the local channel is disabled: set channels.local: true in the config")
    return LocalChannel()

