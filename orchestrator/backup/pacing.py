"""The pace of a backup no one waits for (the scheduled one, Settings' button): after each piece of work (a step
of the database copy, a MiB hashed and written) it sleeps long enough that it works at most SHARE of the time.

A lower CPU priority alone does not keep a turn from slowing down: the backup still streams every page through
the caches and the disk the turn uses (and on a disk whose I/O scheduler ignores priorities, mq-deadline or none,
its writes queue with the turn's at the same rank). Working in short bursts with pauses between them leaves the
turn that runs meanwhile most of the machine; the backup takes about 1 / SHARE times as long.
"""

from __future__ import annotations

import time

SHARE = 0.25  # of the wall-clock time: a quarter of one core at most


class Pacer:
    """Called after each piece of work; sleeps (1 / share - 1) times as long as the work since the last call took."""

    def __init__(self, share: float = SHARE):
        self.rest = 1 / share - 1
        self.mark = time.perf_counter()

    def __call__(self) -> None:
        worked = time.perf_counter() - self.mark
        time.sleep(worked * self.rest)
        self.mark = time.perf_counter()
