"""Show folders to the sandbox uid as its own, then exec a command:
`python -I -S _idmap_exec.py SPEC_JSON -- COMMAND ...`, run as root, before bubblewrap.

Why: when Jarvis runs as root, sandboxed code must never run as host uid 0 (a process with kuid 0 may write
sysctls such as kernel.core_pattern, which the kernel then runs as root outside every namespace), yet a tool
that declares fs_write must be able to write the user's folders, which root owns. An idmapped mount (Linux
5.12+, ext4, xfs, btrfs, tmpfs 6.3+...) solves both: through it, files owned on disk by the folder's owner
appear owned by the sandbox uid, and what the sandbox uid creates is stored as owned by the folder's owner.
Nothing on disk changes ownership, and the sandboxed code keeps an unprivileged uid.

The mounts are made in a private mount namespace of this process (invisible to the host), on top of the
folders' own paths, so bubblewrap binds them as it binds any folder. SPEC_JSON:
`{"uid": SANDBOX_UID, "gid": SANDBOX_GID, "paths": [[PATH, OWNER_UID, OWNER_GID], ...]}`.
Standard library only; exit status 125 with one line `jarvis-idmap: ...` on stderr when it cannot.
"""

import ctypes
import json
import os
import sys

# Syscall numbers from 424 on are the same on every architecture Linux supports (but alpha).
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_MOUNT_SETATTR = 428, 429, 442
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_IDMAP = 0x00100000
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_PRIVATE = 0x4000, 0x40000
EXIT_FAILED = 125

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def userns_fd(inside: int, outside: int, inside_gid: int, outside_gid: int) -> int:
    """A user namespace mapping one uid and gid (inside -> outside), held by a child that waits; its fd."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        ok = libc.unshare(CLONE_NEWUSER) == 0
        os.write(ready_w, b"1" if ok else b"0")
        os.read(go_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(go_r)
    try:
        if os.read(ready_r, 1) != b"1":
            raise OSError(0, "cannot create a user namespace (user namespaces disabled?)")
        with open(f"/proc/{pid}/uid_map", "w") as fh:
            fh.write(f"{inside} {outside} 1\n")
        with open(f"/proc/{pid}/gid_map", "w") as fh:
            fh.write(f"{inside_gid} {outside_gid} 1\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, go_w):
            os.close(fd)


def idmap_in_place(path: str, ns_fd: int) -> None:
    tree = check(libc.syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                              AT_RECURSIVE), f"open_tree {path}")
    attr = MountAttr(MOUNT_ATTR_IDMAP, 0, 0, ns_fd)
    try:
        check(libc.syscall(SYS_MOUNT_SETATTR, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(attr),
                           ctypes.sizeof(attr)),
              f"an idmapped mount of {path} (its file system may not support idmapped mounts)")
        check(libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, path.encode(), MOVE_MOUNT_F_EMPTY_PATH),
              f"move_mount {path}")
    finally:
        os.close(tree)


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: _idmap_exec.py SPEC_JSON -- COMMAND ...")
    spec = json.loads(argv[1])
    try:
        check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
        namespaces: dict[tuple[int, int], int] = {}
        for path, owner_uid, owner_gid in spec["paths"]:
            key = (owner_uid, owner_gid)
            if key not in namespaces:
                namespaces[key] = userns_fd(owner_uid, spec["uid"], owner_gid, spec["gid"])
            idmap_in_place(path, namespaces[key])
        for fd in namespaces.values():
            os.close(fd)
    except OSError as exc:
        sys.stderr.write(f"jarvis-idmap: cannot give the sandbox user its folders: {exc.strerror or exc}\n")
        sys.exit(EXIT_FAILED)
    os.execvp(argv[3], argv[3:])


if __name__ == "__main__":
    main(sys.argv)
