"""How each sandbox backend turns a command into an isolated process (the command line, cwd, env).

bubblewrap (Linux): new mount, pid, ipc, uts, cgroup and network namespaces; the root is an empty tmpfs
remounted read-only after the system folders (/usr, /etc, ...) and the Python installation are bound
read-only into it, so the home directory, /work, /var, /root... simply do not exist inside. The work
directory is a size-limited tmpfs (or a host folder the caller asked for); /tmp and /dev/shm are private
size-limited tmpfs; /proc/sys, /proc/sysrq-trigger and their kind are read-only and /sys is absent.
Resource limits are set inside by `prlimit`. When Jarvis runs as root, sandboxed code never keeps uid 0:
the command drops to an unprivileged uid with `setpriv` (no capabilities, no new privileges), and the
folders a tool may write are shown to that uid as its own through idmapped mounts (`_idmap_exec.py`), so
nothing on disk changes owner. A tool whose network access the user approved gets a network namespace of
its own with egress through slirp4netns (sandbox_network.py): the host's loopback services and abstract
sockets stay out of reach.

sandbox-exec (macOS): a Seatbelt profile that denies network, writes outside the work directory and /tmp,
reads of the home directory, fork and exec of anything but the interpreter; limits by `_limits_exec.py`.
Not testable on Linux.

rlimits (only with sandbox.required: false): resource limits and a scrubbed environment, no isolation.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.core.cgroups import join_argv

if TYPE_CHECKING:
    from .sandbox_network import NetworkHelper

SCRATCH = "/sandbox"  # the work directory inside bubblewrap
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Kernel knobs under /proc, read-only inside whatever the uid (bubblewrap's own cover of them is skipped when
# its write probe fails), and files of /proc that tell about the host's kernel, hidden (as container runtimes do).
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
PROC_HIDDEN = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kallsyms")
LIMITS_EXEC = Path(__file__).with_name("_limits_exec.py")
IDMAP_EXEC = Path(__file__).with_name("_idmap_exec.py")


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed process tree."""

    cpu_seconds: int = 10
    memory_mb: int = 1024
    max_processes: int = 64
    file_size_mb: int = 64
    workdir_mb: int = 128
    wall_timeout_s: float = 30.0
    output_limit_kb: int = 256
    open_files: int = 256
    cpu_cores: float = 1.0  # the share of the machine's cores the whole run may use at once (cgroup cpu.max)
    protocol_limit_mb: int = 8  # all a long-lived process (a jorb script) may write on its protocol pipe

    def without_tree_bound(self) -> "Limits":
        """The limits to use where no memory cgroup bounds the whole run: processes x memory under 1 GB."""
        if self.memory_mb * self.max_processes <= 1024:
            return self
        processes = max(4, min(self.max_processes, 1024 // self.memory_mb))
        return replace(self, max_processes=processes, memory_mb=min(self.memory_mb, 1024 // processes))

    def rlimits(self, *, nproc: bool) -> dict[str, tuple[int, int]]:
        """(soft, hard) per resource. The CPU hard limit is one second later, so SIGXCPU (a clear reason)
        arrives before SIGKILL."""
        mb = 1024 * 1024
        values = {
            "cpu": (self.cpu_seconds, self.cpu_seconds + 1),
            "as": (self.memory_mb * mb, self.memory_mb * mb),
            "fsize": (self.file_size_mb * mb, self.file_size_mb * mb),
            "nofile": (self.open_files, self.open_files),
            "core": (0, 0),
        }
        if nproc:
            values["nproc"] = (self.max_processes, self.max_processes)
        return values


@dataclass(frozen=True)
class Bind:
    """A host path made visible inside. `target`: None = the same path; relative = inside the work directory."""

    source: Path
    target: str | None = None
    writable: bool = False


@dataclass
class LaunchPlan:
    argv: list[str]
    cwd: str
    env: dict[str, str]
    workdir: str  # the work directory as the command sees it
    warnings: list[str] = field(default_factory=list)
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    network: Any = None  # sandbox_network.NetworkSetup: what to start once the sandbox's namespaces exist
    pass_fds: list[int] = field(default_factory=list)  # descriptors the command inherits (the seccomp program)


class SandboxUnavailable(RuntimeError):
    """No sandbox can run here; the message says how to get one."""


INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `sudo apt-get install bubblewrap`, Fedora: `sudo dnf install bubblewrap`, "
    "Arch: `sudo pacman -S bubblewrap`; `make install-system` does it where apt-get exists), or set "
    "`sandbox.required: false` in the config to run generated code with resource limits only (not isolated)"
)
NETWORK_HINT = (
    "a tool with network access runs in a network namespace of its own, which needs slirp4netns: install it "
    "(Debian/Ubuntu: `sudo apt-get install slirp4netns`; `make install-system` does it where apt-get exists)"
)


def base_env(workdir: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra or {})
    return env


def python_dirs() -> list[str]:
    """Folders the interpreter and its packages live in (outside the system folders), outermost only."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))}
    for p in list(candidates):
        candidates.add(os.path.realpath(p))
    paths = sorted({os.path.abspath(p) for p in candidates if p and os.path.isdir(p)})
    outside = [p for p in paths if not any(_under(p, s) for s in SYSTEM_DIRS)]
    return [p for p in outside if not any(q != p and _under(p, q) for q in outside)]


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def readable_by_others(path: Path, *, parents: bool = True) -> bool:
    """Whether an unprivileged uid can read `path` (the path o+r, a folder o+rx; with `parents`, every folder
    on the way o+x: needed without a mount namespace, where the real parents are traversed)."""
    p = Path(os.path.abspath(path))
    try:
        for parent in reversed(p.parents) if parents else ():
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(p).st_mode
    except OSError:
        return False
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & need == need


# -- bubblewrap -------------------------------------------------------------------------------------


class BubblewrapBackend:
    name = "bubblewrap"

    def __init__(self, bwrap: str, *, drop_uid: int | None, setpriv: str | None, prlimit: str | None,
                 network: "NetworkHelper | None" = None):
        if os.geteuid() == 0 and (drop_uid is None or setpriv is None):
            raise SandboxUnavailable("Jarvis runs as root and `setpriv` (util-linux) is missing, so sandboxed code "
                                     "would keep uid 0: install util-linux, or run Jarvis as an ordinary user")
        self.bwrap = bwrap
        self.drop_uid = drop_uid  # set when running as root: the uid the command runs as
        self.setpriv = setpriv
        self.prlimit = prlimit
        self.network = network

    def plan(self, argv: Sequence[str], *, binds: Sequence[Bind], workdir: Path | None, env: Mapping[str, str] | None,
             network: bool, limits: Limits, cgroup_procs: Sequence[Path] = (), hide: Sequence[Path] = (),
             pids_capped: bool = False, home: Path | None = None) -> LaunchPlan:
        """hide: host folders or files kept out of sight where a bind would show them (Jarvis' own config, data,
        checkout and keyring, for instance): a folder is covered by an empty read-only tmpfs, a file by /dev/null.
        home: the user's home; where a writable bind shows it, its top level stays read-only (_home_lock_args)."""
        drop_uid = self.drop_uid
        inside_wd = str(workdir) if workdir is not None else SCRATCH
        args = [self.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
                "--unshare-net", "--die-with-parent", "--new-session", "--hostname", "jarvis-sandbox", "--clearenv"]
        for key, value in base_env(inside_wd, env).items():
            args += ["--setenv", key, value]
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                args += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                args += ["--ro-bind", d, d]
        size = str(limits.workdir_mb * 1024 * 1024)
        args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
        for knob in PROC_READ_ONLY:
            args += ["--ro-bind-try", knob, knob]
        for hidden in PROC_HIDDEN:
            if os.path.exists(hidden):
                args += ["--ro-bind", "/dev/null", hidden]
        args += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
        made: set[str] = {"/", "/tmp", "/proc", "/dev", *SYSTEM_DIRS}

        def mkdirs(target: str) -> None:
            for a in _ancestors(target):
                if a not in made and not any(_under(a, s) for s in SYSTEM_DIRS):
                    args.extend(["--perms", "0755", "--dir", a])
                    made.add(a)

        pythons = python_dirs()
        for d in pythons:
            mkdirs(d)
            args += ["--ro-bind", d, d]
            made.add(d)
        if workdir is None:
            args += ["--perms", "0777", "--size", size, "--tmpfs", SCRATCH]
        else:
            if drop_uid is not None:
                _give_to(Path(inside_wd), drop_uid)
            mkdirs(inside_wd)
            args += ["--bind", inside_wd, inside_wd]
        made.add(inside_wd)
        targets: list[str] = []
        writable: set[str] = set()
        for b in binds:
            target = _target(b, inside_wd)
            if drop_uid is not None and not b.writable and not readable_by_others(b.source, parents=False):
                raise ValueError(f"{b.source} is not readable by the sandbox user (uid {drop_uid}): "
                                 "make it and its folders world-readable, or bind a copy")
            mkdirs(target)
            args += ["--bind" if b.writable else "--ro-bind", str(b.source), target]
            targets.append(target)
            if b.writable:
                writable.add(target)
        lock, reopened = _home_lock_args(home, writable)
        args += lock
        args += _hide_args(hide, targets, writable, read_only=lambda path: _locked(path, home, reopened) if lock else False)
        # A bind of a folder holding the interpreter (say the home directory) must not make it writable, and
        # hiding the checkout must not hide the interpreter inside it: it goes back on top, read-only.
        for d in pythons:
            if any(_under(d, t) for t in targets):
                args += ["--ro-bind", d, d]
        netns = None
        if network:
            if self.network is None:
                raise SandboxUnavailable(NETWORK_HINT)
            netns = self.network.prepare(args)
        seccomp_fd = _seccomp_filter(writes_to_host=workdir is not None or any(b.writable for b in binds))
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--remount-ro", "/", "--chdir", inside_wd, "--"]

        inner: list[str] = []
        # RLIMIT_NPROC counts every process of the uid, other runs' too: with a pids cgroup capping this run's
        # tree it is left off, or one run's fork bomb keeps the next run from starting at all
        rlimits = limits.rlimits(nproc=not pids_capped)
        if self.prlimit:
            inner += [self.prlimit, *_prlimit_args(rlimits), "--"]
        else:
            inner += [sys.executable, "-I", "-S", str(LIMITS_EXEC), json.dumps(rlimits), "--"]
        if drop_uid is not None:
            inner += _setpriv(self.setpriv, drop_uid)
        full = [*_idmap_prefix(binds, drop_uid), *args, *inner, *argv]
        if cgroup_procs:
            full = join_argv(cgroup_procs, full)
        plan = LaunchPlan(argv=full, cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                          workdir=inside_wd)
        if netns is not None:
            plan.network = netns
        if seccomp_fd is not None:
            plan.pass_fds.append(seccomp_fd)
            plan.cleanup.append(lambda: os.close(seccomp_fd))
        return plan


def _seccomp_filter(*, writes_to_host: bool) -> int | None:
    """The seccomp program that refuses set-user-ID and set-group-ID files and user namespaces (sandbox_seccomp.py),
    as a descriptor.
    Where libseccomp is missing, a run that writes to no host folder goes without it; one that does is refused:
    what it creates there belongs to the folder's owner on the host."""
    from .sandbox_seccomp import SeccompUnavailable, program_fd

    try:
        return program_fd()
    except SeccompUnavailable as exc:
        if writes_to_host:
            raise SandboxUnavailable(f"a sandboxed run that writes to a host folder needs its seccomp filter: {exc}") from exc
        return None


def _setpriv(setpriv: str | None, uid: int) -> list[str]:
    return [setpriv or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


def _idmap_prefix(binds: Sequence[Bind], drop_uid: int | None) -> list[str]:
    """When the command drops to `drop_uid`, the writable binds it does not own are shown to it as its own
    (idmapped mounts made by `_idmap_exec.py` in a private mount namespace, before the rest runs)."""
    if drop_uid is None:
        return []
    paths = []
    for b in binds:
        if not b.writable:
            continue
        source = os.path.abspath(b.source)
        st = os.stat(source)
        if st.st_uid != drop_uid:
            paths.append([source, st.st_uid, st.st_gid])
    if not paths:
        return []
    spec = {"uid": drop_uid, "gid": drop_uid, "paths": paths}
    return [sys.executable, "-I", "-S", str(IDMAP_EXEC), json.dumps(spec), "--"]


# Entries of the home a program may run from at the user's next login (Debian's and Ubuntu's ~/.profile put ~/bin
# on PATH when it exists), read-only like the hidden ones.
HOME_PROGRAM_FOLDERS = ("bin",)


def _home_lock_args(home: Path | None, writable: Collection[str]) -> tuple[list[str], list[str]]:
    """Where a writable bind shows the user's home: the home bound read-only on top, then each of its entries
    that is neither hidden (a name with a leading dot) nor HOME_PROGRAM_FOLDERS bound writable again. (The
    arguments, the entries reopened.)

    What a login, a shell, git or Python runs from the home is almost all there: start-up files (~/.bashrc,
    ~/.profile, ~/.zshenv...), ~/.local/bin on PATH, .pth files of ~/.local/lib/pythonX.Y/site-packages that
    every Python of the user runs, ~/.gitconfig and ~/.config/git (hooks, aliases), ~/.config/autostart,
    ~/.config/systemd/user. A list of them always missed one, and could not cover a file that did not exist yet
    (a mount needs a mount point, and one made would shadow the file the shell reads instead: an empty
    ~/.bash_login hides ~/.profile). With the top level read-only nothing new is made there, what is hidden stays
    as it is, and a tool still writes inside the user's folders (~/Documents/...) and to the top-level files it
    was shown. Symbolic links are left as they are (read where they point, if that is shown)."""
    if home is None:
        return [], []
    h = os.path.abspath(home)
    if not os.path.isdir(h) or not any(_under(h, t) for t in writable):
        return [], []
    args = ["--ro-bind", h, h]
    reopened: list[str] = []
    for entry in sorted(os.scandir(h), key=lambda e: e.name):
        if entry.name.startswith(".") or entry.name in HOME_PROGRAM_FOLDERS:
            continue
        try:
            plain = not entry.is_symlink() and (entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False))
        except OSError:  # a mount this process cannot look into: it stays read-only, as the safe side
            plain = False
        if plain:
            args += ["--bind", entry.path, entry.path]
            reopened.append(entry.path)
    return args, reopened


def _locked(path: str, home: Path | None, reopened: Sequence[str]) -> bool:
    """Whether `path` lies in the read-only part of a locked home."""
    if home is None or not _under(path, os.path.abspath(home)):
        return False
    return not any(_under(path, e) for e in reopened)


def _hide_args(hide: Sequence[Path], targets: Sequence[str], writable: Collection[str] = (),
               read_only: Callable[[str], bool] = lambda path: False) -> list[str]:
    """Cover each hidden path that a bind shows (strictly inside a bound target). A folder that does not exist yet
    is made first (empty, 0700, by this process: the mount needs a mount point, and bubblewrap cannot make one in
    an idmapped folder), so that a tool cannot create it: a new ~/.ssh/authorized_keys in a writable home is as
    bad as a changed one.

    In a `writable` target, the folders between it and a hidden path are bound onto themselves first: a mount
    point cannot be renamed, but a folder above one could, and renaming `~/src` to `~/src-old` took the cover
    along with it and left `~/src/jarvis/config/...` free to be written again. A folder already `read_only` there
    (the locked top of a home, _home_lock_args) cannot be renamed anyway, and binding it onto itself would make it
    writable again: it is left as it is."""
    args: list[str] = []
    shown = [(os.path.abspath(h), t) for h in hide for t in targets
             if _under(os.path.abspath(h), t) and os.path.abspath(h) != t]
    pinned: set[str] = set()
    for h_abs, t in shown:
        if t in writable and (os.path.lexists(h_abs) or _can_make(h_abs)):
            for a in _ancestors(h_abs):
                if _under(a, t) and a not in (t, h_abs) and a not in pinned and os.path.isdir(a) and not read_only(a):
                    pinned.add(a)
                    args += ["--bind", a, a]
    for h_abs, _t in shown:
        if os.path.isfile(h_abs):
            args += ["--ro-bind", "/dev/null", h_abs]
            continue
        if not os.path.lexists(h_abs):
            try:
                os.makedirs(h_abs, mode=0o700, exist_ok=True)
            except OSError as exc:
                raise SandboxUnavailable(f"cannot protect {h_abs} inside a writable folder: {exc.strerror}") from None
        if os.path.isdir(h_abs):
            args += ["--perms", "0700", "--tmpfs", h_abs, "--remount-ro", h_abs]
    return args


def _can_make(path: str) -> bool:
    """Makes a hidden folder that does not exist yet (see _hide_args), so its own folders exist to be pinned."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise SandboxUnavailable(f"cannot protect {path} inside a writable folder: {exc.strerror}") from None
    return True


def _give_to(folder: Path, uid: int) -> None:
    """A host work directory must be writable by the uid the command runs as."""
    st = os.stat(folder)
    if st.st_uid != uid:
        os.chown(folder, uid, uid)


def _target(b: Bind, inside_wd: str) -> str:
    if b.target is None:
        return str(Path(b.source).absolute())
    return b.target if b.target.startswith("/") else f"{inside_wd.rstrip('/')}/{b.target}"


def _prlimit_args(values: Mapping[str, tuple[int, int]]) -> list[str]:
    return [f"--{k}={soft}:{hard}" for k, (soft, hard) in values.items()]


# -- macOS sandbox-exec ----------------------------------------------------------------------------


def _sb_quote(path: str) -> str:
    return json.dumps(os.path.realpath(path))


def seatbelt_profile(*, workdir: str, tmpdir: str, readable: Sequence[str], executables: Sequence[str],
                     network: bool, home: str) -> str:
    """A Seatbelt profile: deny network, writes outside workdir/tmp, reads of home, fork, exec of other programs."""
    lines = ["(version 1)", "(allow default)"]
    if not network:
        lines.append("(deny network*)")
    lines += [
        "(deny file-write*)",
        f"(allow file-write* (subpath {_sb_quote(workdir)}) (subpath {_sb_quote(tmpdir)}) "
        '(literal "/dev/null") (literal "/dev/zero") (literal "/dev/dtracehelper") (regex #"^/dev/tty"))',
        f"(deny file-read* (subpath {_sb_quote(home)}))",
        "(allow file-read* " + " ".join(f"(subpath {_sb_quote(p)})" for p in [workdir, tmpdir, *readable]) + ")",
        "(deny process-fork)",
        "(deny process-exec*)",
        "(allow process-exec* " + " ".join(f"(literal {_sb_quote(e)})" for e in executables) + ")",
    ]
    return "\n".join(lines) + "\n"


class HostDirBackend:
    """Backends without a mount namespace (sandbox-exec, rlimits): the command sees host paths, so the work
    directory is a host folder (a fresh temporary one unless given) and relative binds are copied into it."""

    name = "rlimits"

    def __init__(self, *, prlimit: str | None, setpriv: str | None, drop_uid: int | None):
        self.prlimit = prlimit
        self.setpriv = setpriv
        self.drop_uid = drop_uid

    def _workdir(self, workdir: Path | None, binds: Sequence[Bind], plan_cleanup: list) -> tuple[str, str]:
        if workdir is None:
            wd = tempfile.mkdtemp(prefix="jarvis-sbx-")
            plan_cleanup.append(lambda: shutil.rmtree(wd, ignore_errors=True))
        else:
            wd = str(workdir)
        tmp = os.path.join(wd, ".tmp")
        os.makedirs(tmp, exist_ok=True)
        for b in binds:
            if b.target is None or b.target.startswith("/"):
                if b.target is not None and os.path.abspath(b.target) != os.path.abspath(b.source):
                    raise ValueError(f"the {self.name} sandbox cannot show {b.source} at {b.target}; "
                                     "use a path relative to the work directory")
                continue
            dest = Path(wd) / b.target
            dest.parent.mkdir(parents=True, exist_ok=True)
            if Path(b.source).is_dir():
                shutil.copytree(b.source, dest, dirs_exist_ok=True)
            else:
                shutil.copy2(b.source, dest)
        if self.drop_uid is not None:
            for root, dirs, files in os.walk(wd):
                for name in [*dirs, *files]:
                    os.chown(os.path.join(root, name), self.drop_uid, self.drop_uid)
            os.chown(wd, self.drop_uid, self.drop_uid)
        return wd, tmp

    def _limits_prefix(self, limits: Limits, pids_capped: bool = False) -> list[str]:
        # Without a user namespace RLIMIT_NPROC counts all of a user's processes, not the sandbox's: only set
        # it for the dedicated unprivileged uid, and only where no pids cgroup caps the run (the uid is shared
        # by every run, so the limit is too)
        nproc = self.drop_uid is not None and not pids_capped
        if self.prlimit:
            return [self.prlimit, *_prlimit_args(limits.rlimits(nproc=nproc)), "--"]
        return [sys.executable, "-I", "-S", str(LIMITS_EXEC), json.dumps(limits.rlimits(nproc=nproc)), "--"]

    def plan(self, argv: Sequence[str], *, binds: Sequence[Bind], workdir: Path | None, env: Mapping[str, str] | None,
             network: bool, limits: Limits, cgroup_procs: Sequence[Path] = (), hide: Sequence[Path] = (),
             pids_capped: bool = False, home: Path | None = None) -> LaunchPlan:
        cleanup: list[Callable[[], None]] = []
        wd, tmp = self._workdir(workdir, binds, cleanup)
        drop = [] if self.drop_uid is None else _setpriv(self.setpriv, self.drop_uid)
        full = [*_idmap_prefix(binds, self.drop_uid), *self._limits_prefix(limits, pids_capped), *drop, *argv]
        if cgroup_procs:
            full = join_argv(cgroup_procs, full)
        e = base_env(wd, env)
        e["TMPDIR"] = tmp
        warning = ("NOT ISOLATED: no sandbox is available (sandbox.required is false), so this ran with resource "
                   "limits only: it could read your files and use the network. " + INSTALL_HINT.split(", or set")[0])
        return LaunchPlan(argv=full, cwd=wd, env=e, workdir=wd, warnings=[warning], cleanup=cleanup)


class SeatbeltBackend(HostDirBackend):
    name = "sandbox-exec"

    def __init__(self, sandbox_exec: str):
        super().__init__(prlimit=None, setpriv=None, drop_uid=None)
        self.sandbox_exec = sandbox_exec

    def plan(self, argv: Sequence[str], *, binds: Sequence[Bind], workdir: Path | None, env: Mapping[str, str] | None,
             network: bool, limits: Limits, cgroup_procs: Sequence[Path] = (), hide: Sequence[Path] = (),
             pids_capped: bool = False, home: Path | None = None) -> LaunchPlan:
        cleanup: list[Callable[[], None]] = []
        wd, tmp = self._workdir(workdir, binds, cleanup)
        readable = [*python_dirs(), *(str(b.source) for b in binds if b.target is None or b.target.startswith("/")),
                    str(LIMITS_EXEC.parent)]
        first = shutil.which(argv[0]) or argv[0]
        profile = seatbelt_profile(workdir=wd, tmpdir=tmp, readable=readable, network=network,
                                   executables=[sys.executable, os.path.realpath(sys.executable), first],
                                   home=os.path.expanduser("~"))
        full = [self.sandbox_exec, "-p", profile, *self._limits_prefix(limits), *argv]
        e = base_env(wd, env)
        e["TMPDIR"] = tmp
        return LaunchPlan(argv=full, cwd=wd, env=e, workdir=wd, cleanup=cleanup)
