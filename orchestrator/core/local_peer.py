"""Which user runs the program at the other end of a TCP connection on this machine (Linux: /proc/net/tcp*).

Any local user can bind a free loopback port and answer like the server Jarvis expects there (a model server, a
Jarvis): whoever holds the port reads what Jarvis sends. A port number says nothing about who listens on it; the
kernel's socket tables do. `server_uid(sock)` reads the owner of the server side of one connected socket (the
socket the server accepted is its listener's, so it names the listener's user), which is what a check made right
after connecting and before sending needs: it cannot be raced, since it is about the very connection the bytes go
through. `listener_uid(port)` reads who listens on a port, for a look without connecting (`jarvis doctor`).
Elsewhere than Linux neither can be told (None).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path

_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
_LISTEN = "0A"


def trusted_uids() -> frozenset[int]:
    """This user, and root (which can read this user's memory anyway)."""
    return frozenset({os.geteuid(), 0})


def _address(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """A /proc/net/tcp* `ADDR:PORT` field: the address as the kernel stores it (32-bit words in host order)."""
    hex_addr, hex_port = field.rsplit(":", 1)
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] if sys.byteorder == "little" else raw[i:i + 4] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(hex_port, 16)


def _rows() -> list[list[str]] | None:
    rows: list[list[str]] = []
    readable = False
    for table in _TABLES:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        rows += [fields for fields in (line.split() for line in lines) if len(fields) > 7]
    return rows if readable else None


def tables_readable() -> bool:
    return _rows() is not None


def listener_uid(port: int) -> int | None:
    """The user owning a socket that listens on `port` (any address), None where it cannot be told."""
    for fields in _rows() or []:
        if fields[3] == _LISTEN and _address(fields[1])[1] == port:
            return int(fields[7])
    return None


def _endpoint(addr: tuple) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    ip = ipaddress.ip_address(str(addr[0]).split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(addr[1])


def server_uid(sock: socket.socket) -> int | None:
    """The user owning the server side of the connected TCP socket `sock` (its address is `sock`'s peer, its peer is
    `sock`'s own address), None where it cannot be told (not Linux, or the connection is not to this machine)."""
    try:
        mine, theirs = _endpoint(sock.getsockname()), _endpoint(sock.getpeername())
    except (OSError, ValueError):
        return None
    for fields in _rows() or []:
        if fields[3] != _LISTEN and _address(fields[1]) == theirs and _address(fields[2]) == mine:
            return int(fields[7])
    return None


def is_loopback(host: str) -> bool:
    """Whether `host` (as written in a URL) names this machine: `localhost` or a loopback address."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified
