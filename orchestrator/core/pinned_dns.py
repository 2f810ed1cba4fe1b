"""An HTTP transport for URLs someone approved by name (a reminder's webhook): a host *name* may not lead to this
machine or to a link-local address (cloud metadata, 169.254.169.254), however its DNS answers change after the
approval (DNS rebinding). The addresses are checked when the connection is made, and the connection goes to an
address checked, so the name cannot change between the check and the connect. An address written in the URL
itself, or `localhost`, is what the user approved and is used as it is; private networks (a NAS at 192.168.x.x
named `nas.lan`) stay reachable by name.

Its timeouts are per operation (a connect, one read), so a server sending one byte just in time, again and again,
would hold the caller for as long as it liked. Inside `deadline(seconds)`, every connect, read and write of the
transport (and of the proxies `environment_proxies` gives) waits at most what is left of the whole request's
time, and fails with a timeout once it is spent.
"""

from __future__ import annotations

import contextvars
import ipaddress
import socket
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def written_as_address(host: str) -> bool:
    """Whether the URL names the machine itself or an address: nothing to resolve, nothing to rebind."""
    name = host.strip("[]").rstrip(".").lower()
    if name in LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return False
    return True


def forbidden_for_a_name(address: str) -> bool:
    """This machine (loopback, 0.0.0.0 which Linux takes for it, or any address of its own interfaces: a LAN or
    docker-bridge address reaches its services listening on all of them) or link-local (cloud metadata, a
    router's neighbours), also inside an IPv4-mapped IPv6 address."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast or _own_address(ip)


def _own_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether `ip` is one of this machine's: only those can be bound to (any other gives EADDRNOTAVAIL)."""
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(ip), 0))
    except OSError:
        return False
    return True


class NameLeadsHome(httpcore.ConnectError):
    """A host name resolved to this machine or a link-local address."""


_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("pinned_dns_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """The requests made inside through a PinnedTransport end within `seconds` in all (a timeout error after)."""
    token = _DEADLINE.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The time an operation may take: its own timeout, cut to what is left of the request's deadline."""
    end = _DEADLINE.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the request's whole time is spent")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most what is left of the request's deadline (read when
    the operation starts: a pooled connection serves the deadline of the request it is used for)."""

    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _left(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    """Connections within the request's deadline (a proxy's: the proxy resolves the name itself)."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._connect(host, port, _left(timeout, httpcore.ConnectTimeout), local_address,
                                             socket_options))

    def _connect(self, host: str, port: int, timeout: float | None, local_address: str | None,
                 socket_options: Iterable[Any] | None) -> httpcore.NetworkStream:
        return super().connect_tcp(host, port, timeout, local_address, socket_options)


class _CheckedBackend(_DeadlineBackend):
    def _connect(self, host: str, port: int, timeout: float | None, local_address: str | None,
                 socket_options: Iterable[Any] | None) -> httpcore.NetworkStream:
        if written_as_address(host):
            return super()._connect(host, port, timeout, local_address, socket_options)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        home = [a for a in addresses if forbidden_for_a_name(a)]
        if home:
            raise NameLeadsHome(
                f"{host} resolves to {home[0]}, an address of this machine or a link-local one, which a name may "
                "not lead to (its DNS answer may have changed since it was approved); if that address is meant, "
                "write it in the URL itself")
        error: Exception | None = None
        for address in addresses:  # the checked addresses, in the resolver's order
            try:
                return super()._connect(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                error = exc
        raise error or httpcore.ConnectError(f"{host} has no address")


def environment_proxies() -> dict[str, httpx.BaseTransport | None]:
    """The proxies the environment names (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY), as httpx reads them, as a
    client's `mounts`: httpx drops them when a client is given its own transport. Behind a proxy the name is the
    proxy's to resolve; URLs NO_PROXY lists go through the client's (pinned) transport."""
    from httpx._utils import get_environment_proxies  # httpx's own reading, so the two never disagree

    return {pattern: _within_deadline(httpx.HTTPTransport(proxy=url)) if url else None
            for pattern, url in get_environment_proxies().items()}


def _within_deadline(transport: httpx.HTTPTransport) -> httpx.HTTPTransport:
    """A proxy's transport whose connections keep `deadline()` too (httpx builds its pool; its backend is swapped
    before any connection is made)."""
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = _DeadlineBackend()
    return transport


class PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport with its connection pool built as httpx builds it (no proxy), connecting through
    _CheckedBackend. TLS still checks the certificate against the name: httpcore gives the URL's host as the server
    name, whichever checked address the stream goes to."""

    def __init__(self, *, verify: bool = True, trust_env: bool = True, limits: httpx.Limits = httpx.Limits()):
        super().__init__(verify=verify, trust_env=trust_env, limits=limits)
        self._pool = httpcore.ConnectionPool(  # what handle_request sends through (httpx 0.28)
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=trust_env),
            max_connections=limits.max_connections, max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, network_backend=_CheckedBackend())
