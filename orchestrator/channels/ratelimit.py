"""Sending rate limits per channel (a token bucket), shared by every sender in the process."""

from __future__ import annotations

import threading
import time


class TokenBucket:
    def __init__(self, per_minute: int):
        self.capacity = max(1, per_minute)
        self.rate = self.capacity / 60.0
        self.tokens = float(self.capacity)
        self.updated = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self, timeout: float = 60.0) -> bool:
        """Wait for a token; False if none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
                self.updated = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return True
                wait = (1 - self.tokens) / self.rate
            if time.monotonic() + wait > deadline:
                return False
            time.sleep(min(wait, 1.0))


_buckets: dict[tuple[str, int], TokenBucket] = {}
_guard = threading.Lock()


def bucket(channel: str, per_minute: int) -> TokenBucket:
    with _guard:
        return _buckets.setdefault((channel, per_minute), TokenBucket(per_minute))
