"""A seccomp filter that keeps sandboxed code from making set-user-ID or set-group-ID files, or user namespaces.

Why: a writable folder is shown to the sandbox as its own (an idmapped mount), so what the sandbox's uid creates
there belongs, on the host, to the folder's owner: root's folder, a root-owned file. `chmod 4755` on it left a
set-user-ID root program on the host, which any local user who can reach the folder runs as root (`nosuid` holds
only on the sandbox's own mount of it). The filter refuses (EPERM) every way to give a file those bits: chmod,
fchmod, fchmodat with them, and open, openat, creat, mknod, mknodat creating a file with them. fchmodat2 and
openat2 (whose mode sits in a struct a filter cannot read) answer ENOSYS, so libc falls back to the calls above.
Other architectures' system calls (the i386 and x32 ABIs on x86-64) are refused by libseccomp's default.

It also refuses new user namespaces (unshare or clone with CLONE_NEWUSER; clone3, whose flags sit in a struct,
answers ENOSYS and libc falls back to clone): inside one a process is root of its own namespace, the way in to
kernel code unprivileged users otherwise cannot reach. bubblewrap's --disable-userns would need a user namespace
of the sandbox's own, which a run as root does not have.

libseccomp (the system's libseccomp.so.2, through pyseccomp's ctypes binding) writes the BPF program; bubblewrap
loads it (`--seccomp FD`) just before it runs the command, so it holds for every process of the run.
"""

from __future__ import annotations

import errno
import os
import stat
from functools import lru_cache

SET_ID = stat.S_ISUID | stat.S_ISGID
O_CREAT = os.O_CREAT
O_TMPFILE_BIT = 0o20000000  # __O_TMPFILE: O_TMPFILE is it plus O_DIRECTORY
# (syscall, index of its mode argument, index of its flags argument or None)
_MODE_CALLS = (("chmod", 1, None), ("fchmod", 1, None), ("fchmodat", 2, None), ("mknod", 1, None),
               ("mknodat", 2, None), ("creat", 1, None), ("open", 2, 1), ("openat", 3, 2))
_UNREADABLE = ("fchmodat2", "openat2", "clone3")  # their mode or flags are not an argument a filter can see
CLONE_NEWUSER = 0x10000000


class SeccompUnavailable(RuntimeError):
    """libseccomp cannot be loaded here; the message says how to get it."""


@lru_cache(maxsize=1)
def filter_program() -> bytes:
    """The BPF program, built once per process."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError) as exc:  # pyseccomp loads libseccomp.so.2 when imported
        raise SeccompUnavailable(f"libseccomp cannot be loaded ({exc}): install it (Debian/Ubuntu: `sudo apt-get "
                                 "install libseccomp2`)") from None
    refuse = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name, mode_at, flags_at in _MODE_CALLS:
        try:
            seccomp.resolve_syscall(seccomp.system_arch(), name)
        except Exception:  # noqa: BLE001 - a call this architecture does not have (aarch64 has no chmod, open...)
            continue
        for bit in (stat.S_ISUID, stat.S_ISGID):
            mode = seccomp.Arg(mode_at, seccomp.MASKED_EQ, bit, bit)
            if flags_at is None:
                flt.add_rule(refuse, name, mode)
            else:  # the mode counts only when the call creates a file
                for creates in (O_CREAT, O_TMPFILE_BIT):
                    flt.add_rule(refuse, name, seccomp.Arg(flags_at, seccomp.MASKED_EQ, creates, creates), mode)
    for name in _UNREADABLE:
        try:
            flt.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
        except Exception:  # noqa: BLE001 - a libseccomp too old to know the call: the kernel's number is used
            number = {"fchmodat2": 452, "openat2": 437, "clone3": 435}[name]
            flt.add_rule(seccomp.ERRNO(errno.ENOSYS), number)
    new_user = seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    for name in ("unshare", "clone"):  # both take their flags first on x86-64 and aarch64
        flt.add_rule(refuse, name, new_user)
    with os.fdopen(os.memfd_create("jarvis-seccomp-build", os.MFD_CLOEXEC), "w+b") as buffer:
        flt.export_bpf(buffer)
        buffer.flush()
        buffer.seek(0)
        return buffer.read()


def program_fd() -> int:
    """A file descriptor holding the program, read from its start (for bubblewrap's --seccomp). The caller closes it."""
    program = filter_program()
    fd = os.memfd_create("jarvis-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
