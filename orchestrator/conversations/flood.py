"""How many messages one sender may send a chat with Jarvis a minute: past that they are not read, and the sender is
told so at most once a minute (a notice per dropped message would be a flood of Jarvis's own)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from orchestrator.channels.ratelimit import bucket


class Flood:
    def __init__(self, channel: str, data_dir: Path, per_minute: int) -> None:
        self.channel, self.data_dir, self.per_minute = channel, data_dir, per_minute
        self._told: dict[str, float] = {}

    def over(self, sender: str, tell: Callable[[str], None], noun: str = "messages", verb: str = "send") -> bool:
        """True when `sender` is over the limit: the message is not to be read (`tell` says why, once a minute)."""
        if bucket(f"{self.channel}-chat:{self.data_dir}:{sender}", self.per_minute).acquire(timeout=0):
            return False
        now = time.monotonic()
        if now - self._told.get(sender, -120.0) >= 60:
            self._told[sender] = now
            tell(f"Too many {noun} at once (more than {self.per_minute} a minute): the ones past that are not read. "
                 f"Wait a minute, then {verb} again.")
        return True
