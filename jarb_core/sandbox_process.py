"""A running sandboxed process and what it did: SandboxProcess (Popen-style, with a JSON line protocol) and
SandboxResult (return code, captured output, and the reasons it failed in plain words)."""

from __future__ import annotations

import io
import json
import logging
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from orchestrator.core.cgroups import RunCgroup
from .sandbox_network import NetworkSetupError
from .sandbox_backends import LaunchPlan, Limits

log = logging.getLogger(__name__)


class SandboxProtocolError(RuntimeError):
    """The sandboxed process broke the line protocol (a line too long, not JSON, or it ended)."""


@dataclass
class SandboxResult:
    returncode: int | None
    stdout: bytes
    stderr: bytes
    duration_s: float
    backend: str
    killed: str | None = None  # "timeout", "output_limit" or another reason the parent stopped it
    reasons: list[str] = field(default_factory=list)  # why it failed, for people and for the repair prompt
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    process_limit_hits: int = 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.killed is None

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    def describe(self) -> str:
        if self.ok:
            return "succeeded"
        return "; ".join(self.reasons) or f"exited with status {self.returncode}"


def _explain(returncode: int | None, killed: str | None, limits: Limits, output: bytes, hits: int,
             oom_kills: int = 0) -> list[str]:
    reasons: list[str] = []
    if oom_kills:
        reasons.append(f"it ran out of memory: its processes together went over the memory limit of "
                       f"{limits.memory_mb} MB")
    if killed == "timeout":
        reasons.append(f"stopped after the wall timeout of {limits.wall_timeout_s:g} s")
    elif killed == "output_limit":
        reasons.append(f"stopped: it wrote more than the output limit of {limits.output_limit_kb} KB")
    elif killed and killed != "memory_limit":  # memory_limit: said below, from the cgroup's count
        reasons.append(f"stopped: {killed}")
    if hits:
        reasons.append(f"it tried to start more than {limits.max_processes} processes (the process limit)")
    sig = None
    if returncode is not None and returncode < 0:
        sig = -returncode
    elif returncode is not None and 128 < returncode < 160:
        sig = returncode - 128
    tail = output
    if sig == signal.SIGXCPU:
        reasons.append(f"it used more than the CPU limit of {limits.cpu_seconds} s")
    elif sig == signal.SIGXFSZ or b"File too large" in tail:
        reasons.append(f"it wrote a file larger than the file size limit of {limits.file_size_mb} MB")
    elif sig == signal.SIGKILL and killed is None:
        reasons.append(f"it was killed (SIGKILL): the CPU limit ({limits.cpu_seconds} s) or memory ran out")
    elif sig is not None and killed is None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        reasons.append(f"it was killed by {name}")
    if (b"MemoryError" in tail or b"Cannot allocate memory" in tail) and not oom_kills:
        reasons.append(f"it ran out of memory (the memory limit is {limits.memory_mb} MB)")
    if b"jarvis-idmap: " in tail:
        reasons.append(tail.split(b"jarvis-idmap: ", 1)[1].split(b"\n", 1)[0].decode("utf-8", "replace"))
    if b"No space left on device" in tail:
        reasons.append(f"it filled its work space (limit {limits.workdir_mb} MB)")
    if not reasons and returncode not in (0, None):
        reasons.append(f"exited with status {returncode}")
    return reasons


class _Capture(threading.Thread):
    """Reads one pipe into a buffer, up to the run's shared output budget; past it, stops the run."""

    def __init__(self, stream: IO[bytes], budget: "_Budget", on_overflow):
        super().__init__(daemon=True, name="sandbox-capture")
        self.stream = stream
        self.budget = budget
        self.on_overflow = on_overflow
        self.chunks: list[bytes] = []

    def run(self) -> None:
        fd = self.stream.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            kept = self.budget.take(len(data))
            if kept:
                self.chunks.append(data[:kept])
            if kept < len(data):
                self.on_overflow()
                break
        try:
            self.stream.close()
        except OSError:
            pass

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)


class _Budget:
    def __init__(self, limit: int):
        self.left = limit
        self.overflowed = False
        self._lock = threading.Lock()

    def take(self, n: int) -> int:
        with self._lock:
            kept = min(n, max(self.left, 0))
            self.left -= n
            if self.left < 0:
                self.overflowed = True
            return kept


class SandboxProcess:
    """A running sandboxed command. `stdin`/`stdout` are pipes when asked for (Popen-style); stderr is always
    captured (capped). `wait()` returns the SandboxResult and cleans up; the context manager kills on exit."""

    def __init__(self, plan: LaunchPlan, *, backend: str, limits: Limits, cgroup: RunCgroup | None,
                 pipe_stdin: bool, capture_stdout: bool, capture_stderr: bool = True):
        self.backend = backend
        self.limits = limits
        self.workdir = plan.workdir
        self.warnings = list(plan.warnings)
        self._plan = plan
        self._cgroup = cgroup
        self._killed: str | None = None
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self.result: SandboxResult | None = None
        self._budget = _Budget(limits.output_limit_kb * 1024)
        self._buffer = b""
        self._network = plan.network
        try:
            self._popen = subprocess.Popen(
                plan.argv, cwd=plan.cwd, env=plan.env, start_new_session=True, close_fds=True,
                pass_fds=(*plan.pass_fds, *(self._network.child_fds if self._network is not None else ())),
                stdin=subprocess.PIPE if pipe_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except BaseException:
            self._cleanup()
            raise
        if self._network is not None:
            try:
                self._network.start()
            except (NetworkSetupError, OSError) as exc:
                self.kill(f"its network could not be set up: {exc}")
        self.pid = self._popen.pid
        self.stdin: IO[bytes] | None = self._popen.stdin
        self._err: _Capture | None = None
        self.stderr: IO[bytes] | None = None
        if capture_stderr:
            assert self._popen.stderr is not None  # opened as a pipe above
            self._err = _Capture(self._popen.stderr, self._budget, lambda: self.kill("output_limit"))
            self._err.start()
        else:
            self.stderr = self._popen.stderr  # the caller drains it
        self._out: _Capture | None = None
        self.stdout: IO[bytes] | None = None
        if capture_stdout:
            assert self._popen.stdout is not None  # opened as a pipe above
            self._out = _Capture(self._popen.stdout, self._budget, lambda: self.kill("output_limit"))
            self._out.start()
        else:
            self.stdout = self._popen.stdout
        self._timer = threading.Timer(limits.wall_timeout_s, self.kill, args=("timeout",))
        self._timer.daemon = True
        self._timer.start()

    # -- control ---------------------------------------------------------------------------------------
    @property
    def stopped(self) -> str | None:
        return self._killed

    def poll(self) -> int | None:
        return self._popen.poll()

    def kill(self, reason: str = "killed by the caller") -> None:
        """Stop the whole tree: the process group, and (bubblewrap) its pid namespace, and the cgroup's members."""
        # Only while the leader is not reaped (running, or exited and not yet waited for) is its pid still its
        # group's: once reaped, the pid can be handed to an unrelated process (another user's `make`, say) that
        # leads a group of its own. What the run left behind after that is stopped through its cgroup, by
        # membership, never by a number.
        with self._lock:
            state = self._leader()
            if self._killed is None and state == "running":
                self._killed = reason
            if state != "reaped":
                try:
                    os.killpg(self._popen.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if self._cgroup is not None:
            self._cgroup.kill_all()

    def _leader(self) -> str:
        """"running", "exited" (a zombie: its pid is still its own) or "reaped", without reaping it."""
        if self._popen.returncode is not None:
            return "reaped"
        try:
            exited = os.waitid(os.P_PID, self._popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return "reaped"  # by another thread's wait, a moment ago
        return "running" if exited is None else "exited"

    def wait(self, timeout: float | None = None) -> SandboxResult:
        if self.result is not None:
            return self.result
        try:
            returncode = self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the sandboxed process is still running after {timeout} s") from None
        self._timer.cancel()
        if self._cgroup is not None:
            self._cgroup.kill_all()  # --die-with-parent stops the namespace; this also stops escapees elsewhere
        if self._err is not None:
            self._err.join(5)
        if self._out is not None:
            self._out.join(5)
        hits = self._cgroup.limit_hits() if self._cgroup is not None else 0
        oom_kills = self._cgroup.oom_kills() if self._cgroup is not None else 0
        stderr = self._err.data if self._err is not None else b""
        stdout = self._out.data if self._out is not None else b""
        if oom_kills and self._killed is None:
            self._killed = "memory_limit"  # a process of the run was killed for memory: the run did not succeed
        killed = self._killed
        self.result = SandboxResult(
            returncode=returncode, stdout=stdout, stderr=stderr, duration_s=time.monotonic() - self._started,
            backend=self.backend, killed=killed,
            reasons=_explain(returncode, killed, self.limits, stdout[-20000:] + stderr[-20000:], hits, oom_kills),
            truncated=self._budget.overflowed, warnings=self.warnings, process_limit_hits=hits,
        )
        self._cleanup()
        return self.result

    def communicate(self, input: bytes | None = None) -> SandboxResult:
        """Write `input` to stdin (if piped), close it, and wait for the end."""
        if self.stdin is not None:
            try:
                if input:
                    self.stdin.write(input)
                self.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        return self.wait()

    def _cleanup(self) -> None:
        if self._network is not None:
            self._network.close()
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        for fn in self._plan.cleanup:
            try:
                fn()
            except Exception:  # noqa: BLE001 - cleanup must not hide the result
                log.debug("sandbox cleanup failed", exc_info=True)
        self._plan.cleanup = []

    # -- a JSON line protocol over stdin/stdout (jorb scripts) -------------------------------------------
    def send_json(self, obj: Any) -> None:
        if self.stdin is None:
            raise SandboxProtocolError("this process was started without a stdin pipe")
        try:
            self.stdin.write(json.dumps(obj, ensure_ascii=False).encode() + b"\n")
            self.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise SandboxProtocolError(f"the sandboxed process is not reading: {exc}") from None

    def read_json(self, timeout: float | None = None) -> Any:
        """The next line of stdout as JSON. None at end of output. A line past the output limit kills the run."""
        line = self.read_line(timeout)
        if line is None:
            return None
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:
            raise SandboxProtocolError(f"not a JSON line: {line[:200]!r} ({exc})") from None

    def read_line(self, timeout: float | None = None) -> bytes | None:
        if self.stdout is None:
            raise SandboxProtocolError("this process was started without a stdout pipe")
        limit = self.limits.output_limit_kb * 1024
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.stdout.fileno()
        while b"\n" not in self._buffer:
            if len(self._buffer) > limit:
                self.kill("output_limit")
                raise SandboxProtocolError(f"a line longer than the output limit ({self.limits.output_limit_kb} KB)")
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            # poll, not select: select refuses a descriptor numbered 1024 or more (a busy process has them)
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(None if wait is None else wait * 1000):
                raise TimeoutError(f"no line from the sandboxed process within {timeout} s")
            data = os.read(fd, 65536)
            if not data:
                rest, self._buffer = self._buffer, b""
                return rest or None
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def __enter__(self) -> "SandboxProcess":
        return self

    def close(self, grace_s: float = 2.0) -> SandboxResult:
        """Close stdin (end of conversation), give the process `grace_s` to finish, then kill what is left."""
        for stream in (self.stdin,):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self._popen.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill("still running when the caller closed it")
        if self.stdout is not None:
            try:
                self.stdout.close()
            except OSError:
                pass
        return self.wait()

    def __exit__(self, *exc: Any) -> None:
        self.close(grace_s=0.0 if exc and exc[0] is not None else 2.0)


class _BudgetedReader(io.RawIOBase):
    """A pipe from the sandbox read with a byte budget: past it the run is stopped (with `reason`) and the
    reader sees the end of the stream, so nothing the sandbox writes can grow this process without bound."""

    def __init__(self, stream: IO[bytes], budget: int, stop):
        self._fd = stream.fileno()
        self._stream = stream
        self._left = budget
        self._stop = stop

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left < 0:
            return 0  # stopped already
        data = os.read(self._fd, min(len(buffer), self._left + 1, 65536))  # one byte past the budget tells
        if len(data) > self._left:
            self._left = -1
            self._stop()
            return 0
        self._left -= len(data)
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            super().close()


class TextPipe:
    """A SandboxProcess seen as a text-mode `subprocess.Popen`: `stdin`/`stdout`/`stderr` line streams, `poll()`,
    `kill()`, `wait(timeout) -> returncode`. What orchestrator.jorbs' script runner expects of a child.

    Both pipes from the sandbox are read with a byte budget (`limits.protocol_limit_mb` for stdout, the
    protocol; `limits.output_limit_kb` for stderr): past it the run is stopped and `stopped` says why."""

    def __init__(self, proc: SandboxProcess):
        if proc.stdin is None or proc.stdout is None or proc.stderr is None:
            raise ValueError("TextPipe needs a process spawned with stdin, stdout and stderr as pipes")
        self.process = proc
        self.pid = proc.pid
        limits = proc.limits
        out = _BudgetedReader(proc.stdout, limits.protocol_limit_mb * 1024 * 1024, lambda: proc.kill(
            f"it wrote more than {limits.protocol_limit_mb} MB to Jarvis (sandbox.protocol_limit_mb)"))
        err = _BudgetedReader(proc.stderr, limits.output_limit_kb * 1024, lambda: proc.kill(
            f"it wrote more than the output limit of {limits.output_limit_kb} KB (sandbox.output_limit_kb)"))
        self.stdin = io.TextIOWrapper(proc.stdin, encoding="utf-8", line_buffering=True, write_through=True)
        self.stdout = io.TextIOWrapper(io.BufferedReader(out), encoding="utf-8", errors="replace")
        self.stderr = io.TextIOWrapper(io.BufferedReader(err), encoding="utf-8", errors="replace")

    @property
    def stopped(self) -> str | None:
        """Why the sandbox stopped the run (a budget, the wall timeout...), if it did."""
        return self.process.stopped

    def poll(self) -> int | None:
        return self.process.poll()

    def kill(self) -> None:
        self.process.kill("killed by the caller")

    def wait(self, timeout: float | None = None) -> int | None:
        return self.process.wait(timeout).returncode
