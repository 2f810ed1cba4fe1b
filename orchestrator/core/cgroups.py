"""A cgroup per sandboxed run or per task's browser: one bound on a whole process tree (memory, processes, CPU)
that holds for root. Used by the sandbox (jarb_core/sandbox.py: memory, pids, cpu) and by each task's browser
(mcp/browser_pool.py: memory only).

Per-process limits (RLIMIT_AS, RLIMIT_NPROC) do not bound a tree: eight children of 700 MB each stay under a
1 GB RLIMIT_AS, and uid 0 ignores RLIMIT_NPROC. A cgroup does: `memory.max` counts every page the run's
processes use, its tmpfs files (/tmp, /dev/shm, the work directory) included; `pids.max` counts its processes
and threads; `cpu.max` keeps it to its share of the cores. It also lets the run be swept (every member killed).

Each controller is taken where this process may make a child cgroup: a cgroup v1 hierarchy of that controller,
or cgroup v2 where the controller is enabled (or can be) below this process's own cgroup. `RunCgroup.create`
returns None when none of them can be had; `missing()` says which controllers are not available and why, so
that the sandbox and the browsers can say so at start-up and fall back to per-process or soft limits.
A process joins its cgroups before it runs anything (`join_argv`: a shell that writes its own pid, then
becomes the command), so no child is ever started outside.

Every Jarvis process on a machine makes its cgroups side by side under the same parent (two test workers, two
users' Jarvis under a v1 root hierarchy), and each sweeps the ones left by a Jarvis that died. A cgroup's name says
who made it: pid, pid namespace and the process's start time, since pids are reused (32,768 of them wrap in
minutes on a busy machine) and a pid means nothing in another namespace. Only a cgroup whose maker is proven gone
is swept (its pid is free, or taken by a process that started later); one made in another pid namespace, or named
without that identity, is never touched: a live Jarvis's runs are not killed on a guess.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "jarvis-"  # jarvis-<kind>-<pid>-<pid namespace>.<start time>-<random>: kind sbx (a sandboxed run), browser
CONTROLLERS = ("pids", "memory", "cpu")
CPU_PERIOD_US = 100_000
_lock = threading.Lock()
_parents: dict[str, tuple[Path, str] | str] | None = None  # controller -> (parent dir, version) or why not


@dataclass(frozen=True)
class CgroupLimits:
    """The bounds of one cgroup; a controller whose bound is None is not used (a browser's has memory only)."""

    memory_bytes: int
    max_pids: int | None = None
    cpu_cores: float | None = None

    def wanted(self, controller: str) -> bool:
        return {"memory": self.memory_bytes, "pids": self.max_pids, "cpu": self.cpu_cores}[controller] is not None


def _own_cgroups() -> tuple[dict[str, str], str | None]:
    """(v1 controller -> path, v2 path) of this process, from /proc/self/cgroup."""
    v1: dict[str, str] = {}
    v2: str | None = None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            v2 = path
        for c in controllers.split(","):
            if c:
                v1[c] = path
    return v1, v2


def _mounts() -> tuple[dict[str, Path], Path | None]:
    """(v1 controller -> mount point, the v2 unified hierarchy), from /proc/self/mountinfo."""
    v1: dict[str, Path] = {}
    v2: Path | None = None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return v1, None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        mount_point, fstype, options = fields[4], rfields[0], rfields[2]
        if fstype == "cgroup":
            for c in CONTROLLERS:
                if c in options.split(","):
                    v1.setdefault(c, Path(mount_point))
        elif fstype == "cgroup2" and v2 is None:
            v2 = Path(mount_point)
    return v1, v2


def _find_parents() -> dict[str, tuple[Path, str] | str]:
    """Where to make each controller's per-run cgroup (below this process's own cgroup), or why not."""
    if not Path("/proc/self/cgroup").exists():
        return {c: "no cgroups on this system" for c in CONTROLLERS}
    own_v1, own_v2 = _own_cgroups()
    v1_mounts, v2 = _mounts()
    found: dict[str, tuple[Path, str] | str] = {}
    v2_available: list[str] = []
    v2_base: Path | None = None
    if v2 is not None and own_v2 is not None:
        v2_base = v2 / own_v2.lstrip("/")
        try:
            v2_available = (v2_base / "cgroup.controllers").read_text().split()
        except OSError:
            v2_available = []
    for c in CONTROLLERS:
        if c in v1_mounts and c in own_v1:
            parent = v1_mounts[c] / own_v1[c].lstrip("/")
            found[c] = (parent, "v1") if os.access(parent, os.W_OK) else f"{parent} is not writable"
        elif v2_base is not None and c in v2_available:
            found[c] = (v2_base, "v2") if os.access(v2_base, os.W_OK) else f"{v2_base} is not writable"
        else:
            found[c] = f"the {c} controller is not available to this process (not delegated)"
    return found


def parents() -> dict[str, tuple[Path, str] | str]:
    global _parents
    with _lock:
        if _parents is None:
            _parents = _find_parents()
            for where in _parents.values():
                if isinstance(where, tuple):
                    _sweep_stale(where[0], where[1])
        return _parents


def missing() -> dict[str, str]:
    """The controllers a run's cgroup will not have here, and why."""
    return {c: why for c, why in parents().items() if isinstance(why, str)}


class RunCgroup:
    """One run's cgroups (one directory per v1 hierarchy, one for all of v2). Put the run in them by writing its
    pid to each of `procs_files` before it forks anything."""

    def __init__(self, dirs: dict[str, tuple[Path, str]], limits: CgroupLimits | None = None):
        self.dirs = dirs  # controller -> (directory, version)
        self.limits = limits

    @property
    def procs_files(self) -> list[Path]:
        return sorted({d / "cgroup.procs" for d, _ in self.dirs.values()})

    def _dir(self, controller: str) -> tuple[Path, str] | None:
        return self.dirs.get(controller)

    @classmethod
    def create(cls, limits: CgroupLimits, kind: str = "sbx") -> "RunCgroup | None":
        name = f"{PREFIX}{kind}-{os.getpid()}-{identity(os.getpid())}-{uuid.uuid4().hex[:8]}"
        dirs: dict[str, tuple[Path, str]] = {}
        made: list[Path] = []
        for controller, where in parents().items():
            if isinstance(where, str) or not limits.wanted(controller):
                continue
            parent, version = where
            path = parent / name
            try:
                if path not in made:
                    path.mkdir()
                    made.append(path)
                if version == "v2" and not (path / f"{controller}.max").exists():
                    (parent / "cgroup.subtree_control").write_text(f"+{controller}")
                _set_limit(path, version, controller, limits)
            except OSError as exc:
                log.info("no %s cgroup for a %s under %s: %s", controller, kind, parent, exc.strerror or exc)
                with _lock:
                    assert _parents is not None
                    _parents[controller] = f"cannot use the {controller} controller under {parent}: " \
                                           f"{exc.strerror or exc}"
                continue
            dirs[controller] = (path, version)
        unused = [p for p in made if not any(d == p for d, _ in dirs.values())]
        for p in unused:
            _rmdir_quietly(p)
        return cls(dirs, limits) if dirs else None

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this cgroup from its first instruction (see join_argv)."""
        return join_argv(self.procs_files, argv)

    def members(self) -> list[int]:
        pids: set[int] = set()
        for procs in self.procs_files:
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(pids)

    def _events(self, controller: str, file_v2: str, file_v1: str, key: str) -> int:
        found = self._dir(controller)
        if found is None:
            return 0
        path, version = found
        try:
            for line in (path / (file_v2 if version == "v2" else file_v1)).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def limit_hits(self) -> int:
        """How many times a fork was refused because the process cap was reached."""
        return self._events("pids", "pids.events", "pids.events", "max")

    def oom_kills(self) -> int:
        """How many of the run's processes the kernel killed for going over the memory limit."""
        return self._events("memory", "memory.events", "memory.oom_control", "oom_kill")

    def kill_all(self) -> None:
        for path, version in self.dirs.values():
            kill_file = path / "cgroup.kill"
            if version == "v2" and kill_file.exists():
                try:
                    kill_file.write_text("1")
                    return
                except OSError:
                    pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # members may fork while being killed; the cap bounds how many
            pids = self.members()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.001)

    def remove(self) -> None:
        """Kill what is left and remove the cgroups (retrying while killed members are being reaped)."""
        self.kill_all()
        for path in sorted({d for d, _ in self.dirs.values()}):
            for _ in range(2000):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        log.warning("could not remove %s: %s", path, exc)
                        break
                    self.kill_all()
                    time.sleep(0.001)
            else:
                log.warning("could not remove %s: still busy", path)


def join_argv(procs_files: Sequence[Path], argv: Sequence[str]) -> list[str]:
    """Enter the cgroups before anything else runs, then become the command (no window to fork outside).
    One procs file per hierarchy (cgroup v1 has one per controller; v2 one in all)."""
    joins = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(procs_files)))
    script = f'{joins} && shift {len(procs_files)} && exec "$@"'
    return ["/bin/sh", "-c", script, "sh", *(str(p) for p in procs_files), *argv]


def _set_limit(path: Path, version: str, controller: str, limits: CgroupLimits) -> None:
    if controller == "pids":
        assert limits.max_pids is not None
        (path / "pids.max").write_text(str(limits.max_pids))
    elif controller == "memory" and version == "v2":
        (path / "memory.max").write_text(str(limits.memory_bytes))
        if (path / "memory.swap.max").exists():
            (path / "memory.swap.max").write_text("0")
    elif controller == "memory":
        (path / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
        if (path / "memory.memsw.limit_in_bytes").exists():  # with swap accounting: no swap beyond the limit
            (path / "memory.memsw.limit_in_bytes").write_text(str(limits.memory_bytes))
    elif controller == "cpu":
        assert limits.cpu_cores is not None
        quota = max(1000, int(limits.cpu_cores * CPU_PERIOD_US))
        if version == "v2":
            (path / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        else:
            (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota))


def _rmdir_quietly(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def identity(pid: int) -> str | None:
    """`<pid namespace>.<start time>` of a process of this namespace (None when there is none with this pid): the
    same pid later held by another process gives another identity."""
    try:
        start = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]
        return f"{_own_namespace()}.{start}"
    except (OSError, IndexError):
        return None


def _own_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def maker_gone(name: str) -> bool:
    """Whether the process that made the cgroup `name` is proven gone: it was made in this pid namespace, and its
    pid is free or held by a process that is not its maker. Anything else (this process's own, another namespace's,
    a name without the maker's identity) is not."""
    parts = name[len(PREFIX):].split("-")
    if not name.startswith(PREFIX) or len(parts) != 4 or not parts[1].isdigit():
        return False
    pid, made_by = int(parts[1]), parts[2]
    if pid == os.getpid() or made_by.partition(".")[0] != _own_namespace():
        return False
    return identity(pid) != made_by


def _sweep_stale(parent: Path, version: str) -> None:
    """Remove cgroups left by a Jarvis process that died (see the module's docstring for how that is known)."""
    try:
        entries = list(parent.glob(f"{PREFIX}*"))
    except OSError:
        return
    for entry in entries:
        if maker_gone(entry.name):
            RunCgroup({"pids": (entry, version)}).remove()
