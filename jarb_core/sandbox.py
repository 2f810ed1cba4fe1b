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

Each run gets a cgroup (cgroups.py) that bounds its whole process tree: memory (tmpfs files included),
processes and CPU share; it holds for root too and lets every process the run left be killed at its end.
Where a memory cgroup cannot be had, the sandbox says so once at start-up and lowers the per-process limits
so that processes x memory stays under 1 GB. Sandboxed code never runs as host uid 0 (see sandbox_backends).
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from orchestrator.core import cgroups
from orchestrator.core.cgroups import CgroupLimits, RunCgroup
from .sandbox_backends import (
    INSTALL_HINT,
    Bind,
    BubblewrapBackend,
    HostDirBackend,
    Limits,
    SandboxUnavailable,
    SeatbeltBackend,
    readable_by_others,
)
from .sandbox_network import NetworkHelper
from .sandbox_process import SandboxProcess, SandboxProtocolError, SandboxResult, TextPipe

__all__ = ["Bind", "Limits", "Sandbox", "SandboxProcess", "SandboxResult", "SandboxUnavailable", "SandboxProtocolError",
           "TextPipe", "script_spawner"]

log = logging.getLogger(__name__)

NOBODY = 65534


class Sandbox:
    """Runs commands isolated. One instance per configuration; safe to share between threads."""

    def __init__(self, limits: Limits | None = None, *, required: bool = True, backend: str = "auto",
                 unprivileged_uid: int = NOBODY):
        self.required = required
        self.unprivileged_uid = unprivileged_uid
        self._backend = self._choose(backend)
        self.backend = self._backend.name
        self.tree_bound = sys.platform.startswith("linux") and "memory" not in cgroups.missing()
        self.limits = self.bounded(limits or Limits())
        if sys.platform.startswith("linux") and not self.tree_bound:
            _warn_once("no memory cgroup for sandboxed runs (%s): each process is limited instead, with at most %d "
                       "processes of %d MB", cgroups.missing().get("memory"), self.limits.max_processes,
                       self.limits.memory_mb)

    def bounded(self, limits: Limits) -> Limits:
        """`limits` as they can hold here: without a memory cgroup, lowered so that processes x memory < 1 GB."""
        return limits if self.tree_bound else limits.without_tree_bound()

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
                backend: BubblewrapBackend | None = None
                problem: str | None
                try:
                    backend = self._bubblewrap(bwrap)
                except SandboxUnavailable as exc:
                    problem = str(exc)
                else:
                    problem = _probe(backend)
                if backend is not None and problem is None:
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
        if wanted == "none" and self.required:
            raise SandboxUnavailable("sandbox.backend is none but sandbox.required is true: set sandbox.required: "
                                     "false to run generated code without isolation (resource limits only)")
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
        return BubblewrapBackend(bwrap, drop_uid=drop, setpriv=setpriv, prlimit=shutil.which("prlimit"),
                                 network=NetworkHelper.find())

    # -- running ------------------------------------------------------------------------------------------
    def spawn(self, argv: Sequence[str], *, binds: Sequence[Bind] = (), workdir: Path | None = None,
              env: Mapping[str, str] | None = None, network: bool = False, limits: Limits | None = None,
              stdin: bool = True, capture_stdout: bool = False, capture_stderr: bool = True,
              hide: Sequence[Path] = (), home: Path | None = None) -> SandboxProcess:
        """Start `argv` in the sandbox and return at once (stdin/stdout pipes for a long-lived conversation).

        binds: host files/folders to show read-only (or writable) inside; a relative target lands in the work
        directory. When Jarvis runs as root the command runs as the unprivileged uid and writable binds are shown
        to it as its own (idmapped mounts): their files keep their owner on disk. workdir: None for a private
        size-limited scratch directory, or a host folder to work in (when Jarvis runs as root it is handed to
        the sandbox uid so the command can write there). network: a network namespace of its own with egress
        only (only for tools whose network access the user approved). hide: host folders or files kept out of
        sight where binds would show them. home: the user's home, whose top level stays read-only where a
        writable bind shows it (no start-up file, ~/.local/bin program or .pth file is made or changed there).
        """
        limits = self.bounded(limits or self.limits)
        if not argv:
            raise ValueError("no command given")
        cgroup = None
        if sys.platform.startswith("linux"):
            cgroup = RunCgroup.create(CgroupLimits(max_pids=limits.max_processes,
                                                   memory_bytes=limits.memory_mb * 1024 * 1024,
                                                   cpu_cores=limits.cpu_cores))
        if (cgroup is None or "pids" not in cgroup.dirs) and os.geteuid() == 0 and \
                getattr(self._backend, "drop_uid", None) is None:
            raise SandboxUnavailable(
                "Cannot cap the number of processes: Jarvis runs as root, no pids cgroup can be made here and "
                "`setpriv` (util-linux) is missing or cannot be used, so a fork bomb could take the machine down. "
                "Install util-linux's setpriv, or run Jarvis as an ordinary user.")
        try:
            plan = self._backend.plan(list(argv), binds=binds, workdir=workdir, env=env, network=network, limits=limits,
                                      cgroup_procs=cgroup.procs_files if cgroup else (), hide=hide,
                                      pids_capped=cgroup is not None and "pids" in cgroup.dirs, home=home)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        if cgroup is None and self.isolated is False and os.geteuid() != 0:
            plan.warnings.append("the number of processes is not capped (no pids cgroup without a sandbox)")
        return SandboxProcess(plan, backend=self.backend, limits=limits, cgroup=cgroup, pipe_stdin=stdin,
                              capture_stdout=capture_stdout, capture_stderr=capture_stderr)

    def run(self, argv: Sequence[str], *, input: bytes | None = None, binds: Sequence[Bind] = (),
            workdir: Path | None = None, env: Mapping[str, str] | None = None, network: bool = False,
            limits: Limits | None = None, hide: Sequence[Path] = (), home: Path | None = None) -> SandboxResult:
        """Run `argv` to completion and return what it did (stdout and stderr captured, capped)."""
        proc = self.spawn(argv, binds=binds, workdir=workdir, env=env, network=network, limits=limits,
                          stdin=input is not None, capture_stdout=True, hide=hide, home=home)
        return proc.communicate(input)

    def with_limits(self, **changes: Any) -> Limits:
        return replace(self.limits, **changes)


def script_spawner(settings: Any) -> Callable[[list[str]], TextPipe]:
    """How orchestrator.jorbs starts a jorb script: `spawn(argv)` -> a text-mode pipe to a sandboxed process.

    `settings` is Jarvis' Settings (read duck-typed: `sandbox.*` and `jorbs.script_timeout_s`). The script
    runner keeps its own deadline; the sandbox's wall timeout is a backstop a little beyond it. Raises
    SandboxUnavailable (with how to install bubblewrap) when no sandbox exists and sandbox.required is true.
    """
    c = settings.sandbox
    script_timeout = float(getattr(getattr(settings, "jorbs", None), "script_timeout_s", c.wall_timeout_s))
    limits = Limits(cpu_seconds=c.cpu_seconds, memory_mb=c.memory_mb, max_processes=c.max_processes,
                    file_size_mb=c.file_size_mb, workdir_mb=c.workdir_mb,
                    wall_timeout_s=max(c.wall_timeout_s, script_timeout + 10), output_limit_kb=c.output_limit_kb,
                    open_files=c.open_files, cpu_cores=c.cpu_cores, protocol_limit_mb=c.protocol_limit_mb)
    sandbox = Sandbox(limits, required=c.required, backend=c.backend, unprivileged_uid=c.unprivileged_uid)

    def spawn(argv: list[str]) -> TextPipe:
        return TextPipe(sandbox.spawn(argv, stdin=True, capture_stdout=False, capture_stderr=False))

    return spawn


_warned: set[str] = set()


def _warn_once(message: str, *args: Any) -> None:
    text = message % args
    if text not in _warned:
        _warned.add(text)
        log.warning(text)


def _readable_by_nobody(path: str) -> bool:
    return readable_by_others(Path(path))


_probe_cache: dict[tuple, str | None] = {}


def _probe(backend: BubblewrapBackend) -> str | None:
    """Run `true` in a minimal bubblewrap sandbox once, so a bwrap that cannot work here (no user namespaces,
    a container without privileges) is reported at start with its own error."""
    key = (backend.bwrap, backend.drop_uid)
    if key in _probe_cache:
        return _probe_cache[key]
    plan = backend.plan(["/bin/true"], binds=(), workdir=None, env=None, network=False, limits=Limits())
    try:
        proc = subprocess.run(plan.argv, cwd=plan.cwd, env=plan.env, capture_output=True, timeout=20,
                              pass_fds=plan.pass_fds)
        problem = None if proc.returncode == 0 else (proc.stderr.decode("utf-8", "replace").strip() or
                                                     f"exit status {proc.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    finally:
        for done in plan.cleanup:
            done()
    _probe_cache[key] = problem
    return problem
