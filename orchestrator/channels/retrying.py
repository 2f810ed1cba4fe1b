"""A channel's loop that keeps trying while its service is down (Telegram's poller, Matrix's sync): the wait between
tries doubles, is capped and jittered, and what the loop knows of the outage (since when, how many failed tries,
the last error, the next try) is what /api/health and `jarvis doctor` show of the channel.

One place for it, so every channel backs off the same way and is reported the same way.
"""

from __future__ import annotations

import random
import time
from datetime import datetime, timezone

RETRY_FIRST_S, RETRY_MAX_S = 1.0, 60.0


def retry_delay(failures: int) -> float:
    """The wait before the next try after `failures` failed ones in a row: doubling from RETRY_FIRST_S, capped at
    RETRY_MAX_S, plus up to RETRY_FIRST_S at random so workers and restarts do not retry in step; never less than
    RETRY_FIRST_S, so a channel that fails at once is no hot loop."""
    return min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** min(failures - 1, 16) + random.uniform(0, RETRY_FIRST_S))


class Outage:
    """The down state of a channel's loop. `failed(exc)`: one more failed try, returns the wait before the next;
    `recovered()`: a try worked. `tries` names a try in the note ("poll", "sync")."""

    tries = "try"

    def __init__(self) -> None:
        self.last_error: str | None = None
        self.failures = 0  # tries failed in a row
        self.down_since: datetime | None = None
        self.next_retry_at: float | None = None  # time.time() of the next try while down

    def failed(self, exc: BaseException) -> float:
        self.failures += 1
        self.last_error = str(exc) or type(exc).__name__  # a bare timeout says nothing by itself
        self.down_since = self.down_since or datetime.now(timezone.utc)
        delay = retry_delay(self.failures)
        self.next_retry_at = time.time() + delay
        return delay

    def recovered(self) -> None:
        self.last_error, self.failures, self.down_since, self.next_retry_at = None, 0, None, None

    def down_note(self) -> str:
        since = f" since {self.down_since:%H:%M:%S} UTC" if self.down_since else ""
        retry = (f"; next retry in {max(0.0, self.next_retry_at - time.time()):.0f} s"
                 f" ({datetime.fromtimestamp(self.next_retry_at, timezone.utc):%H:%M:%S} UTC)"
                 if self.next_retry_at else "")
        failed = f"{self.failures} failed {self.tries}{'s' * (self.failures != 1)}"
        return f"down{since} ({failed}): {self.last_error}{retry}"
