"""Run a command isolated from the machine, with resource limits, a wall timeout and capped output.

    sandbox = Sandbox(Limits(cpu_seconds=10, wall_timeout_s=20), required=True)
    result = sandbox.run([sandbox.python, "-I", "-B", "-m", "pytest", "-q", "test_x.py"],
                         binds=[Bind(Path("tools/x_v1.py"), "x.py"), Bind(Path("tests/test_x.py"), "test_x.py")])
    result.ok, result.returncode, result.stdout, result.reasons   # why it failed, in plain words

    with sandbox.spawn([sandbox.python, "-I", "script.py"], binds=[...]) as proc:   # a long-lived pipe
        proc.send_json({"hello": 1}); reply = proc.read_json(timeout=5)
    proc.result   # SandboxResult once it has ended

Backends (see sandbox_backends.py): bubblewrap on Linux, sandbox-exec on macOS. Where neither exists the
constructor refuses (SandboxUnavailable, with how to install bubblewrap) unless `required=False`; then the
command runs with resource limits only and every result carries a warning saying so.

Processes are capped by a pids cgroup made for the run where possible (it holds for root too), and by
RLIMIT_NPROC under an unprivileged uid (when Jarvis runs as root the command drops to uid 65534: uid 0
ignores RLIMIT_NPROC). When the run ends (or is killed) every process it left is killed.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from .cgroups import PidsCgroup
from .sandbox_backends import (
    INSTALL_HINT,
    Bind,
    BubblewrapBackend,
    HostDirBackend,
    LaunchPlan,
    Limits,
    SandboxUnavailable,
    SeatbeltBackend,
)

__all__ = ["Bind", "Limits", "Sandbox", "SandboxProcess", "SandboxResult", "SandboxUnavailable", "SandboxProtocolError"]

log = logging.getLogger(__name__)

NOBODY = 65534


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


def _explain(returncode: int | None, killed: str | None, limits: Limits, output: bytes, hits: int) -> list[str]:
    reasons: list[str] = []
    if killed == "timeout":
        reasons.append(f"stopped after the wall timeout of {limits.wall_timeout_s:g} s")
    elif killed == "output_limit":
        reasons.append(f"stopped: it wrote more than the output limit of {limits.output_limit_kb} KB")
    elif killed:
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
    if b"MemoryError" in tail or b"Cannot allocate memory" in tail:
        reasons.append(f"it ran out of memory (the memory limit is {limits.memory_mb} MB)")
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

    def __init__(self, plan: LaunchPlan, *, backend: str, limits: Limits, cgroup: PidsCgroup | None,
                 pipe_stdin: bool, capture_stdout: bool):
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
        try:
            self._popen = subprocess.Popen(
                plan.argv, cwd=plan.cwd, env=plan.env, start_new_session=True, close_fds=True,
                stdin=subprocess.PIPE if pipe_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except BaseException:
            self._cleanup()
            raise
        self.pid = self._popen.pid
        self.stdin: IO[bytes] | None = self._popen.stdin
        self._err = _Capture(self._popen.stderr, self._budget, lambda: self.kill("output_limit"))
        self._err.start()
        self._out: _Capture | None = None
        self.stdout: IO[bytes] | None = None
        if capture_stdout:
            self._out = _Capture(self._popen.stdout, self._budget, lambda: self.kill("output_limit"))
            self._out.start()
        else:
            self.stdout = self._popen.stdout
        self._timer = threading.Timer(limits.wall_timeout_s, self.kill, args=("timeout",))
        self._timer.daemon = True
        self._timer.start()

    # -- control ---------------------------------------------------------------------------------------
    def poll(self) -> int | None:
        return self._popen.poll()

    def kill(self, reason: str = "killed by the caller") -> None:
        """Stop the whole tree: the process group, and (bubblewrap) its pid namespace, and the cgroup's members."""
        with self._lock:
            if self._killed is None and self._popen.poll() is None:
                self._killed = reason
        try:
            os.killpg(self._popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self._cgroup is not None:
            self._cgroup.kill_all()

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
        self._err.join(5)
        if self._out is not None:
            self._out.join(5)
        hits = self._cgroup.limit_hits() if self._cgroup is not None else 0
        stderr = self._err.data
        stdout = self._out.data if self._out is not None else b""
        killed = self._killed
        self.result = SandboxResult(
            returncode=returncode, stdout=stdout, stderr=stderr, duration_s=time.monotonic() - self._started,
            backend=self.backend, killed=killed,
            reasons=_explain(returncode, killed, self.limits, stdout[-20000:] + stderr[-20000:], hits),
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
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
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


class Sandbox:
    """Runs commands isolated. One instance per configuration; safe to share between threads."""

    def __init__(self, limits: Limits | None = None, *, required: bool = True, backend: str = "auto",
                 unprivileged_uid: int = NOBODY):
        self.limits = limits or Limits()
        self.required = required
        self.unprivileged_uid = unprivileged_uid
        self._backend = self._choose(backend)
        self.backend = self._backend.name

    @property
    def python(self) -> str:
        """The interpreter to run inside (the same one Jarvis runs on, with its packages, read-only)."""
        return sys.executable

    @property
    def isolated(self) -> bool:
        return self.backend in ("bubblewrap", "sandbox-exec")

    # -- choosing a backend -------------------------------------------------------------------------------
    def _choose(self, wanted: str):
        system = platform.system()
        errors: list[str] = []
        if wanted in ("auto", "bubblewrap") and system == "Linux":
            bwrap = shutil.which("bwrap")
            if bwrap:
                backend = self._bubblewrap(bwrap)
                problem = _probe(backend)
                if problem is None:
                    return backend
                errors.append(f"bubblewrap is installed but cannot create a sandbox here: {problem}")
            else:
                errors.append("bubblewrap (bwrap) is not installed")
        if wanted in ("auto", "sandbox-exec") and system == "Darwin":
            sandbox_exec = shutil.which("sandbox-exec") or ("/usr/bin/sandbox-exec" if Path("/usr/bin/sandbox-exec").exists() else None)
            if sandbox_exec:
                return SeatbeltBackend(sandbox_exec)
            errors.append("sandbox-exec is not available")
        if wanted not in ("auto", "bubblewrap", "sandbox-exec", "none"):
            raise ValueError(f"unknown sandbox backend {wanted!r}: use auto, bubblewrap, sandbox-exec or none")
        if wanted != "none" and self.required:
            why = "; ".join(errors) or f"no sandbox backend for {system}"
            raise SandboxUnavailable(f"Cannot run generated code safely: {why}. To fix it, {INSTALL_HINT}.")
        drop = None
        if os.geteuid() == 0 and shutil.which("setpriv") and all(
                _readable_by_nobody(p) for p in (sys.executable, os.path.realpath(sys.executable))):
            drop = self.unprivileged_uid
        return HostDirBackend(prlimit=shutil.which("prlimit"), setpriv=shutil.which("setpriv"), drop_uid=drop)

    def _bubblewrap(self, bwrap: str) -> BubblewrapBackend:
        drop = None
        setpriv = shutil.which("setpriv")
        if os.geteuid() == 0 and setpriv:
            drop = self.unprivileged_uid
        return BubblewrapBackend(bwrap, drop_uid=drop, setpriv=setpriv, prlimit=shutil.which("prlimit"))

    # -- running ------------------------------------------------------------------------------------------
    def spawn(self, argv: Sequence[str], *, binds: Sequence[Bind] = (), workdir: Path | None = None,
              env: Mapping[str, str] | None = None, network: bool = False, limits: Limits | None = None,
              stdin: bool = True, capture_stdout: bool = False, keep_uid: bool = False,
              hide: Sequence[Path] = ()) -> SandboxProcess:
        """Start `argv` in the sandbox and return at once (stdin/stdout pipes for a long-lived conversation).

        binds: host files/folders to show read-only (or writable) inside; a relative target lands in the work
        directory. workdir: None for a private size-limited scratch directory, or a host folder to work in (when
        Jarvis runs as root it is handed to the sandbox uid so the command can write there).
        network: keep the host network (only for tools whose network access the user approved).
        keep_uid: when Jarvis runs as root, run as root without capabilities instead of the unprivileged uid, so
        writable binds of the user's folders work; a pids cgroup is then required. hide: host folders covered
        by an empty tmpfs where binds would show them.
        """
        limits = limits or self.limits
        if not argv:
            raise ValueError("no command given")
        cgroup = PidsCgroup.create(limits.max_processes) if sys.platform.startswith("linux") else None
        drops = getattr(self._backend, "drop_uid", None) is not None and not keep_uid
        if cgroup is None and os.geteuid() == 0 and not drops:
            raise SandboxUnavailable(
                "Cannot cap the number of processes: Jarvis runs as root, no pids cgroup can be made here and "
                "`setpriv` (util-linux) is missing or cannot be used, so a fork bomb could take the machine down. "
                "Install util-linux's setpriv, or run Jarvis as an ordinary user.")
        try:
            plan = self._backend.plan(list(argv), binds=binds, workdir=workdir, env=env, network=network, limits=limits,
                                      cgroup_procs=cgroup.procs_file if cgroup else None, keep_uid=keep_uid, hide=hide)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        if cgroup is None and self.isolated is False and os.geteuid() != 0:
            plan.warnings.append("the number of processes is not capped (no pids cgroup without a sandbox)")
        return SandboxProcess(plan, backend=self.backend, limits=limits, cgroup=cgroup, pipe_stdin=stdin,
                              capture_stdout=capture_stdout)

    def run(self, argv: Sequence[str], *, input: bytes | None = None, binds: Sequence[Bind] = (),
            workdir: Path | None = None, env: Mapping[str, str] | None = None, network: bool = False,
            limits: Limits | None = None, keep_uid: bool = False, hide: Sequence[Path] = ()) -> SandboxResult:
        """Run `argv` to completion and return what it did (stdout and stderr captured, capped)."""
        proc = self.spawn(argv, binds=binds, workdir=workdir, env=env, network=network, limits=limits,
                          stdin=input is not None, capture_stdout=True, keep_uid=keep_uid, hide=hide)
        return proc.communicate(input)

    def with_limits(self, **changes: Any) -> Limits:
        return replace(self.limits, **changes)


def _readable_by_nobody(path: str) -> bool:
    from .sandbox_backends import readable_by_others

    return readable_by_others(Path(path))


_probe_cache: dict[tuple, str | None] = {}


def _probe(backend: BubblewrapBackend) -> str | None:
    """Run `true` in a minimal bubblewrap sandbox once, so a bwrap that cannot work here (no user namespaces,
    a container without privileges) is reported at start with its own error."""
    key = (backend.bwrap, backend.drop_uid)
    if key in _probe_cache:
        return _probe_cache[key]
    plan = backend.plan(["/bin/true"], binds=(), workdir=None, env=None, network=False, limits=Limits(), cgroup_procs=None)
    try:
        proc = subprocess.run(plan.argv, cwd=plan.cwd, env=plan.env, capture_output=True, timeout=20)
        problem = None if proc.returncode == 0 else (proc.stderr.decode("utf-8", "replace").strip() or
                                                     f"exit status {proc.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    _probe_cache[key] = problem
    return problem
