"""HTTP clients for a server that must be run by this user when it runs on this machine (a model server Jarvis
started or chose): any other local user can bind a free loopback port (Jan's, Ollama's, the port of a server
Jarvis is still starting) and read every prompt sent there.

Each connection is checked after it is made and before a byte is sent: when its other end is a socket of this
machine (local_peer.server_uid), that socket's user must be this user, root, or a user the config names for that
server (`models.<role>.server_user`, for an Ollama run by its own system user); else the connection is closed
and the request fails with ServerOfAnotherUser, which says which user holds the port. A connection to a loopback
address whose owner cannot be read (the tables are there, the row is not) is refused too. Connections to other
machines pass unchecked, through the environment's proxies as before.
"""

from __future__ import annotations

import functools
import ipaddress
import pwd
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from .local_peer import server_uid, tables_readable, trusted_uids


class ServerOfAnotherUser(httpcore.ConnectError):
    """The port answers, but the program listening on it runs as another local user."""


def user_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def uid_of(user: str | int) -> int:
    """A user name or number as a uid (ValueError for an unknown name)."""
    if isinstance(user, int) or str(user).isdigit():
        return int(user)
    try:
        return pwd.getpwnam(str(user)).pw_uid
    except KeyError as exc:
        raise ValueError(f"no local user named {user!r}") from exc


def server_users(cfg: Any) -> tuple[int, ...]:
    """The users besides this one whose server a model or embeddings config accepts (its `server_user`)."""
    user = getattr(cfg, "server_user", None)
    return (uid_of(user),) if user else ()


def check_connection(sock: socket.socket | None, allowed: frozenset[int]) -> None:
    """Raise ServerOfAnotherUser unless the server side of `sock` is a socket of one of `allowed`, or is not on
    this machine."""
    if sock is None:  # the stream does not say which socket it is: nothing can be told, nothing is sent
        raise ServerOfAnotherUser("the connection's socket cannot be read, so who listens cannot be told")
    owner = server_uid(sock)
    if owner is None:
        try:
            peer = ipaddress.ip_address(str(sock.getpeername()[0]).split("%")[0])
        except (OSError, ValueError):
            return
        if peer.is_loopback and tables_readable():
            raise ServerOfAnotherUser(f"which user listens on {peer} port {sock.getpeername()[1]} cannot be told, "
                                      "so nothing is sent to it")
        return
    if owner not in allowed:
        host, port = sock.getpeername()[:2]
        raise ServerOfAnotherUser(
            f"the program listening on {host} port {port} runs as another user, {user_name(owner)}, not as you: "
            "nothing was sent to it (any local user can take a free port). Stop it, or if that user's server is "
            "meant (an Ollama run as its own system user), name the user in the model's server_user setting")


def _checked(stream: Any, allowed: frozenset[int]) -> Any:
    try:
        check_connection(stream.get_extra_info("socket"), allowed)
    except ServerOfAnotherUser:
        stream.close()
        raise
    return stream


class _OwnedBackend(httpcore.SyncBackend):
    def __init__(self, allowed: frozenset[int]):
        self.allowed = allowed

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _checked(super().connect_tcp(host, port, timeout, local_address, socket_options), self.allowed)


class _OwnedAsyncBackend(httpcore.AnyIOBackend):
    def __init__(self, allowed: frozenset[int]):
        self.allowed = allowed

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        stream = await super().connect_tcp(host, port, timeout, local_address, socket_options)
        try:
            check_connection(stream.get_extra_info("socket"), self.allowed)
        except ServerOfAnotherUser:
            await stream.aclose()
            raise
        return stream


@functools.cache
def _ssl_context(verify: bool) -> ssl.SSLContext:
    """One TLS context per `verify` for every owned client of the process (a context is shared safely between
    connections): making one loads the CA bundle, and a chat's model clients made six of them at start-up."""
    return httpx.create_ssl_context(verify=verify)


def _pool_kwargs(verify: bool, limits: httpx.Limits) -> dict[str, Any]:
    return {"ssl_context": _ssl_context(verify), "max_connections": limits.max_connections,
            "max_keepalive_connections": limits.max_keepalive_connections,
            "keepalive_expiry": limits.keepalive_expiry}


class OwnedTransport(httpx.HTTPTransport):
    """httpx's transport, its pool connecting through _OwnedBackend (as pinned_dns.PinnedTransport builds it)."""

    def __init__(self, extra_users: Iterable[int] = (), *, verify: bool = True, limits: httpx.Limits = httpx.Limits()):
        super().__init__(verify=_ssl_context(verify), limits=limits)
        self._pool = httpcore.ConnectionPool(network_backend=_OwnedBackend(trusted_uids() | set(extra_users)),
                                             **_pool_kwargs(verify, limits))


class OwnedAsyncTransport(httpx.AsyncHTTPTransport):
    def __init__(self, extra_users: Iterable[int] = (), *, verify: bool = True, limits: httpx.Limits = httpx.Limits()):
        super().__init__(verify=_ssl_context(verify), limits=limits)
        self._pool = httpcore.AsyncConnectionPool(network_backend=_OwnedAsyncBackend(trusted_uids() | set(extra_users)),
                                                  **_pool_kwargs(verify, limits))


def _proxy_mounts(transport_class: type) -> dict[str, Any]:
    """The environment's proxies (HTTP_PROXY, NO_PROXY...) as httpx reads them, as a client's `mounts`."""
    from httpx._utils import get_environment_proxies  # httpx's own reading, so the two never disagree

    return {pattern: transport_class(proxy=url) if url else None for pattern, url in get_environment_proxies().items()}


def owned_client(extra_users: Iterable[int] = (), *, trust_env: bool = True, **kwargs: Any) -> httpx.Client:
    """An httpx client whose connections are checked; `trust_env`: the environment's proxies still apply to the
    URLs they cover (httpx drops them when a client is given its own transport)."""
    return httpx.Client(transport=OwnedTransport(extra_users), trust_env=trust_env,
                        mounts=_proxy_mounts(httpx.HTTPTransport) if trust_env else {}, **kwargs)


def owned_async_client(extra_users: Iterable[int] = (), *, trust_env: bool = True, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=OwnedAsyncTransport(extra_users), trust_env=trust_env,
                             mounts=_proxy_mounts(httpx.AsyncHTTPTransport) if trust_env else {}, **kwargs)
