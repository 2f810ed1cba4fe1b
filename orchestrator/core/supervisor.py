"""Keeping a program running: a restart policy and the small loop that applies it.

The same `RestartPolicy` is written into the systemd unit and the launchd agent (server/service_unit.py), applied by
`jarvis service run` where neither exists (a container, WSL without systemd), and by `jarvis run` to the outside
model server it starts (`models.primary.start`). Like systemd's Restart=on-failure with a start limit: a program
that exits 0 is done; one that fails or is killed is started again after `delay_s`, unless it failed `burst` times
within `interval_s`, which means it cannot start (a broken config), and restarting would only spin the CPU.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .child_env import child_environment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestartPolicy:
    restart: Literal["on-failure", "always"] = "on-failure"
    delay_s: float = 5.0
    burst: int = 5  # starts allowed within interval_s before giving up
    interval_s: float = 120.0
    stop_grace_s: float = 20.0  # SIGTERM, then SIGKILL after this long

    def should_restart(self, returncode: int) -> bool:
        return self.restart == "always" or returncode != 0


JARVIS_POLICY = RestartPolicy()


def _pdeathsig() -> Callable[[], None] | None:
    """Linux: PR_SET_PDEATHSIG, so a supervised program is killed when the thread that started it dies (that
    thread is the supervisor's loop, which lives as long as the supervision): a `jarvis run` killed with SIGKILL
    leaves no model server behind. Resolved here, so the child only makes the system call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG


_die_with_parent = _pdeathsig()


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (signal 0 checks without sending; one we may not signal exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


class Supervisor:
    """Runs `argv` and starts it again by `policy` until `stop()` or the start limit. `run()` blocks (the
    foreground of `jarvis service run`); `start()` runs it in a daemon thread (the outside model server)."""

    def __init__(self, argv: Sequence[str], policy: RestartPolicy = JARVIS_POLICY, *, name: str | None = None,
                 env: dict[str, str] | None = None, cwd: str | None = None, stdout=None, stderr=None,
                 on_event: Callable[[str], None] | None = None, die_with_parent: bool = True):
        self.argv = list(argv)
        self.policy = policy
        self.name = name or os.path.basename(self.argv[0])
        # none of Jarvis's secrets unless the caller passes them (`jarvis run` itself): fail closed
        self.env = env if env is not None else child_environment()
        self.cwd, self.stdout, self.stderr = cwd, stdout, stderr
        self.on_event = on_event or (lambda text: log.info("%s", text))
        self.die_with_parent = die_with_parent
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.last_exit: str | None = None
        self.gave_up: str | None = None
        self._stop = threading.Event()
        self._stop_at: float | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def run(self) -> int:
        """Until stopped (returns 0), a clean exit under on-failure (0), or the start limit (1)."""
        recent: deque[float] = deque(maxlen=self.policy.burst)
        while not self._stop.is_set():
            now = time.monotonic()
            if len(recent) == self.policy.burst and now - recent[0] < self.policy.interval_s:
                self.gave_up = (f"{self.name} failed {self.policy.burst} times within {self.policy.interval_s:g} s "
                                f"(last: {self.last_exit}); not started again")
                self.on_event(self.gave_up)
                return 1
            recent.append(now)
            with self._lock:
                if self._stop.is_set():
                    break
                try:
                    self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdout=self.stdout,
                                                 stderr=self.stderr, start_new_session=True,
                                                 preexec_fn=_die_with_parent if self.die_with_parent else None)
                except OSError as exc:
                    self.last_exit = f"could not start: {exc}"
                    self.on_event(f"{self.name} {self.last_exit}")
                    self.proc = None
                    if self._stop.wait(self.policy.delay_s):
                        break
                    continue
                self.starts += 1
            self.on_event(f"started {self.name} (pid {self.proc.pid})")
            code = self._wait(self.proc)
            self.last_exit = describe_exit(code)
            if self._stop.is_set():
                break
            if not self.policy.should_restart(code):
                self.on_event(f"{self.name} {self.last_exit}; done")
                return 0
            self.on_event(f"{self.name} {self.last_exit}; starting it again in {self.policy.delay_s:g} s")
            if self._stop.wait(self.policy.delay_s):
                break
        return 0

    def start(self) -> "Supervisor":
        self._thread = threading.Thread(target=self.run, name=f"supervise-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _wait(self, proc: subprocess.Popen) -> int:
        """Wait for the program; once a stop is asked, SIGKILL its group when the grace time is over."""
        while True:
            try:
                return proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                if self._stop_at is not None and time.monotonic() - self._stop_at > self.policy.stop_grace_s:
                    self._signal(proc, signal.SIGKILL)

    @staticmethod
    def _signal(proc: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def request_stop(self) -> None:
        """No more restarts, and SIGTERM to the program's process group (safe in a signal handler: it waits for
        nothing; the loop sends SIGKILL if the program is still there after the grace time)."""
        self._stop_at = self._stop_at or time.monotonic()
        self._stop.set()
        proc = self.proc
        if proc is not None and proc.returncode is None:
            self._signal(proc, signal.SIGTERM)

    def stop(self) -> None:
        """request_stop, then wait until the program has exited (the thread of start() included)."""
        with self._lock:
            self.request_stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.policy.stop_grace_s + 5)
        elif self.proc is not None and self.proc.returncode is None:
            self._wait(self.proc)
