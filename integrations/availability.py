"""Whether an integration can work now (signed in, an account configured): one answer its tools share, as their
ToolMeta `unavailable` (a callable returning why not, or None).

The catalog (orchestrator/tools/catalog.py) asks it at each planner step: the tools of an integration that is not
connected are not offered to the model nor found by find_tools (a small model told of `gmail_get_thread` calls it
to say hello), and the Tools view says why they are absent. The answer (a keyring read, say) is kept `ttl_s`
seconds, so a turn's steps do not read it once per tool and per step, and a sign-in made while Jarvis runs counts
within that time. An answer that raises is "not available" with the error as the reason (fail closed: a tool
whose state cannot be told is not offered).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Availability:
    """`why()` -> the reason the integration cannot work now, or None; called at most once per `ttl_s`."""

    def __init__(self, why: Callable[[], str | None], *, ttl_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic):
        self._why = why
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._answer: tuple[float, str | None] | None = None

    def __call__(self) -> str | None:
        now = self._clock()
        with self._lock:
            if self._answer is not None and now - self._answer[0] < self._ttl_s:
                return self._answer[1]
        try:
            reason = self._why()
        except Exception as exc:  # noqa: BLE001 - whatever stops the check, the tools are not offered
            reason = f"cannot tell whether it is connected: {type(exc).__name__}: {exc}"
        with self._lock:
            self._answer = (now, reason)
        return reason
