"""Progress of long tool work, shown by the CLI and UI as `progress` events (see orchestrator/chat/turns.py).

Inside a graph run, LangGraph's stream writer carries custom events to whoever streams the turn; outside one
(a plain function call, a benchmark) there is nobody to tell and the event is dropped.
"""

from __future__ import annotations

import time
from typing import Any


def _writer():
    try:
        from langgraph.config import get_stream_writer

        return get_stream_writer()
    except Exception:  # noqa: BLE001 - not inside a graph run
        return None


class Progress:
    """Rate-limited progress events for one tool call: at most one every `every_s` seconds."""

    def __init__(self, tool: str, total: int | None = None, unit: str = "pages", every_s: float = 0.5):
        self.tool = tool
        self.total = total
        self.unit = unit
        self.every_s = every_s
        self._last = 0.0
        self._write = _writer()

    def __call__(self, done: int, message: str | None = None, *, force: bool = False) -> None:
        if self._write is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        event: dict[str, Any] = {"event": "progress", "tool": self.tool, "done": done, "unit": self.unit}
        if self.total is not None:
            event["total"] = self.total
        of = f"/{self.total}" if self.total is not None else ""
        event["message"] = message or f"{self.tool}: {done}{of} {self.unit}"
        try:
            self._write(event)
        except Exception:  # noqa: BLE001 - progress must never fail the work
            self._write = None
