"""Network for a sandboxed tool whose network access the user approved, without the host's network namespace.

Sharing the host's namespace would let the tool reach every loopback service (Jarvis's own server among them)
and the host's abstract unix sockets (X11, D-Bus class). Instead the sandbox keeps a namespace of its own and
slirp4netns gives it egress: a user-mode TCP/IP stack in this process's namespace that forwards the sandbox's
connections as ordinary sockets of the host, with `--disable-host-loopback` so that the host's 127.0.0.0/8 is
not reachable through it. Inside, the tool sees a `tap0` interface, a default route and a DNS forwarder at
10.0.2.3 (written into the sandbox's /etc/resolv.conf).

How it is wired to bubblewrap: `--info-fd` tells the pid of the sandbox once its namespaces exist and
`--block-fd` holds the command back until slirp4netns says (on `--ready-fd`) that the network is up; the
sandbox's end is then released. `--exit-fd` stops slirp4netns when the run's end closes it.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from orchestrator.core.child_env import child_environment

SLIRP_DNS = "10.0.2.3"
NS_GET_USERNS = 0xB701  # ioctl on a namespace fd: the user namespace that owns it (linux/nsfs.h)
SETUP_TIMEOUT_S = 10.0
_resolv_lock = threading.Lock()
_resolv_path: str | None = None


class NetworkSetupError(RuntimeError):
    """The sandbox's network could not be brought up; the message says why."""


def _resolv_conf() -> str:
    """A resolv.conf naming slirp4netns's DNS forwarder (one per process, world-readable)."""
    global _resolv_path
    with _resolv_lock:
        if _resolv_path is None or not os.path.exists(_resolv_path):
            fd, path = tempfile.mkstemp(prefix="jarvis-resolv-", suffix=".conf")
            with os.fdopen(fd, "w") as fh:
                fh.write(f"nameserver {SLIRP_DNS}\n")
            os.chmod(path, 0o644)
            _resolv_path = path
            atexit.register(_remove, path)  # one per process: gone with it (each run left one in /tmp)
        return _resolv_path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


@dataclass
class NetworkSetup:
    """One run's network: the pipes shared with bubblewrap, then the slirp4netns process.

    Order matters. bubblewrap's child brings `lo` up first; slirp4netns configuring the namespace before that
    makes bubblewrap fail ("loopback: Failed RTM_NEWADDR"), so slirp4netns starts once 127.0.0.1 is in the
    namespace's routes, and the command (held by `--block-fd`) runs once slirp4netns says the network is up.
    As an ordinary user bubblewrap also moves its child into a nested user namespace (after mounting devpts as
    uid 0) that owns nothing of the network namespace, so slirp4netns joins the user namespace that owns the
    network namespace (asked of the kernel with NS_GET_USERNS), not the child's current one.
    """

    slirp4netns: str
    info: tuple[int, int]  # (read, write) of bubblewrap's --info-fd
    block: tuple[int, int]  # --block-fd: the command waits for the network
    process: subprocess.Popen | None = None
    exit_w: int = -1
    _open: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._open = [*self.info, *self.block]

    @property
    def child_fds(self) -> tuple[int, ...]:
        """The fds bubblewrap inherits."""
        return self.info[1], self.block[0]

    def _close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self._open:
                self._open.remove(fd)
                os.close(fd)

    def start(self, timeout_s: float = SETUP_TIMEOUT_S) -> None:
        """After the sandbox was started: bring its network up, then let its command run."""
        self._close(*self.child_fds)
        deadline = time.monotonic() + timeout_s
        info = _read_until(self.info[0], deadline, lambda data: b"}" in data)
        try:
            pid = int(json.loads(info.decode())["child-pid"])
        except (ValueError, KeyError, UnicodeDecodeError) as exc:
            raise NetworkSetupError(f"bubblewrap did not say where the sandbox is ({exc}): {info[:200]!r}") from None
        _wait_for_loopback(pid, deadline)
        userns_fd = None
        if os.geteuid() != 0:  # bubblewrap made user namespaces: join the one that owns the network namespace
            netns_fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                userns_fd = fcntl.ioctl(netns_fd, NS_GET_USERNS)
            finally:
                os.close(netns_fd)
            self._open.append(userns_fd)
        ready_r, ready_w = os.pipe()
        exit_r, self.exit_w = os.pipe()
        self._open += [ready_r, self.exit_w]
        # As root, slirp4netns (which parses the sandbox's traffic with libslirp) runs in a mount namespace of its
        # own without the host's files and under its own seccomp filter. An ordinary user's slirp4netns joins the
        # sandbox's user namespace, where --enable-sandbox fails ("setegid(0)"); a bug hit there gives that user.
        hardened = ["--enable-sandbox", "--enable-seccomp"] if os.geteuid() == 0 else []
        argv = [self.slirp4netns, "--configure", "--mtu=65520", "--disable-host-loopback", *hardened,
                f"--ready-fd={ready_w}", f"--exit-fd={exit_r}"]
        if userns_fd is not None:
            argv.append(f"--userns-path=/proc/self/fd/{userns_fd}")
        argv += [str(pid), "tap0"]
        passed = (ready_w, exit_r, *((userns_fd,) if userns_fd is not None else ()))
        try:
            self.process = subprocess.Popen(argv, pass_fds=passed, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            env=child_environment())
        finally:
            os.close(ready_w)
            os.close(exit_r)
            if userns_fd is not None:
                self._close(userns_fd)
        ready = _read_until(ready_r, deadline, lambda data: len(data) >= 1)
        self._close(ready_r)
        if ready != b"1":
            raise NetworkSetupError("slirp4netns did not bring the sandbox's network up: " + self._slirp_error())
        os.write(self.block[1], b"1")
        self._close(self.block[1])

    def _slirp_error(self) -> str:
        if self.process is None:
            return "it did not start"
        try:
            self.process.wait(1)
            err = self.process.stderr.read().decode("utf-8", "replace") if self.process.stderr else ""
        except subprocess.TimeoutExpired:
            err = ""
        return err.strip()[-500:] or f"exit status {self.process.returncode}"

    def close(self) -> None:
        """Stop slirp4netns (closing its exit fd) and release every fd still held."""
        self._close(*list(self._open))
        if self.process is not None and self.process.returncode is None:
            try:
                self.process.wait(2)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.process.stderr is not None:
                self.process.stderr.close()


def _wait_for_loopback(pid: int, deadline: float) -> None:
    """Until bubblewrap's child has brought `lo` up (127.0.0.1 in the namespace's local routes)."""
    trie = f"/proc/{pid}/net/fib_trie"
    while True:
        try:
            with open(trie) as fh:
                if "127.0.0.1" in fh.read():
                    return
        except OSError as exc:
            raise NetworkSetupError(f"the sandbox ended before its network was set up ({exc.strerror})") from None
        if time.monotonic() > deadline:
            raise NetworkSetupError("the sandbox's loopback did not come up in time")
        time.sleep(0.001)


def _read_until(fd: int, deadline: float, done) -> bytes:
    data = b""
    while not done(data):
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise NetworkSetupError("the sandbox's network did not come up in time")
        poller = select.poll()  # not select: it refuses a descriptor numbered 1024 or more
        poller.register(fd, select.POLLIN)
        if not poller.poll(wait * 1000):
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


class NetworkHelper:
    """Adds what a networked run needs to a bubblewrap command line."""

    def __init__(self, slirp4netns: str):
        self.slirp4netns = slirp4netns

    @classmethod
    def find(cls) -> "NetworkHelper | None":
        found = shutil.which("slirp4netns")
        return cls(found) if found else None

    def prepare(self, args: list[str]) -> NetworkSetup:
        setup = NetworkSetup(self.slirp4netns, info=os.pipe(), block=os.pipe())
        # where /etc/resolv.conf is a symlink (systemd-resolved), the file it points to is the one to replace
        resolv = os.path.realpath("/etc/resolv.conf") if os.path.islink("/etc/resolv.conf") else "/etc/resolv.conf"
        args += ["--info-fd", str(setup.info[1]), "--block-fd", str(setup.block[0]), "--ro-bind", _resolv_conf(),
                 resolv]
        return setup
