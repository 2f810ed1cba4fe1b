"""A pids cgroup per sandboxed run: a process cap that holds for root too.

RLIMIT_NPROC does not apply to uid 0 and counts per user, not per sandbox; a pids cgroup caps the processes
(and threads) of exactly one run, whoever runs it, and lets the run be swept (every member killed) at the end.
One is made where the cgroup file system lets this process make one: cgroup v1 with a writable `pids`
hierarchy, or cgroup v2 where `pids` is enabled (or can be enabled) below this process's own cgroup.
Elsewhere `PidsCgroup.create` returns None and the sandbox relies on its other caps.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import threading
import time
import uuid
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "jarvis-sbx-"
_unavailable: str | None = None  # why no cgroup can be made here (remembered: asked on every run)
_lock = threading.Lock()


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


def _mounts() -> tuple[Path | None, Path | None]:
    """(the v1 pids hierarchy, the v2 unified hierarchy) mount points, from /proc/self/mountinfo."""
    v1_pids: Path | None = None
    v2: Path | None = None
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None, None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        mount_point, fstype, options = fields[4], rfields[0], rfields[2]
        if fstype == "cgroup" and "pids" in options.split(","):
            v1_pids = Path(mount_point)
        elif fstype == "cgroup2" and v2 is None:
            v2 = Path(mount_point)
    return v1_pids, v2


def _parent_dir() -> tuple[Path, str] | str:
    """Where to make the per-run cgroups (below this process's own cgroup) and the version, or why not."""
    if not Path("/proc/self/cgroup").exists():
        return "no cgroups on this system"
    own_v1, own_v2 = _own_cgroups()
    v1_pids, v2 = _mounts()
    if v1_pids is not None and "pids" in own_v1:
        return v1_pids / own_v1["pids"].lstrip("/"), "v1"
    if v2 is not None and own_v2 is not None:
        base = v2 / own_v2.lstrip("/")
        controllers = (v2 / "cgroup.controllers") if own_v2 == "/" else (base / "cgroup.controllers")
        try:
            if "pids" not in controllers.read_text().split():
                return "the pids controller is not available in this cgroup (not delegated)"
        except OSError as exc:
            return f"cannot read {controllers}: {exc.strerror}"
        return base, "v2"
    return "no pids cgroup hierarchy is mounted"


class PidsCgroup:
    """One run's cgroup. Put the run in it by writing its pid to `procs_file` before it forks anything."""

    def __init__(self, path: Path, version: str, max_pids: int):
        self.path = path
        self.version = version
        self.max_pids = max_pids

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    @classmethod
    def create(cls, max_pids: int) -> "PidsCgroup | None":
        global _unavailable
        with _lock:
            if _unavailable is not None:
                return None
            found = _parent_dir()
            if isinstance(found, str):
                _unavailable = found
                log.info("no pids cgroup for the sandbox: %s", found)
                return None
            parent, version = found
            _sweep_stale(parent, version)
        path = parent / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
            if version == "v2" and not (path / "pids.max").exists():
                try:
                    (parent / "cgroup.subtree_control").write_text("+pids")
                except OSError as exc:
                    raise OSError(exc.errno, f"cannot enable pids below {parent}: {exc.strerror}") from None
            (path / "pids.max").write_text(str(max_pids))
        except OSError as exc:
            with _lock:
                _unavailable = f"cannot create a cgroup under {parent}: {exc.strerror or exc}"
            log.info("no pids cgroup for the sandbox: %s", _unavailable)
            try:
                path.rmdir()
            except OSError:
                pass
            return None
        return cls(path, version, max_pids)

    def members(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_file.read_text().split()]
        except (OSError, ValueError):
            return []

    def limit_hits(self) -> int:
        """How many times a fork was refused because the cap was reached."""
        try:
            for line in (self.path / "pids.events").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill_all(self) -> None:
        kill_file = self.path / "cgroup.kill"
        if self.version == "v2" and kill_file.exists():
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
        """Kill what is left and remove the cgroup (retrying while killed members are being reaped)."""
        self.kill_all()
        for _ in range(2000):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    log.warning("could not remove %s: %s", self.path, exc)
                    return
                self.kill_all()
                time.sleep(0.001)
        log.warning("could not remove %s: still busy", self.path)


def _sweep_stale(parent: Path, version: str) -> None:
    """Remove cgroups left by a Jarvis process that died (their pid is gone)."""
    try:
        entries = list(parent.glob(f"{PREFIX}*"))
    except OSError:
        return
    for entry in entries:
        try:
            owner = int(entry.name[len(PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if owner == os.getpid() or _alive(owner):
            continue
        PidsCgroup(entry, version, 0).remove()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reset_cache() -> None:
    """Forget a remembered failure (tests)."""
    global _unavailable
    with _lock:
        _unavailable = None
