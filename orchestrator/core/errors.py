"""Errors that cross layers: raised low (a model client, the embedded server) and caught high (a turn, a jorb
step, the CLI), so they live below both."""

from __future__ import annotations

from collections.abc import Iterator


class ModelEndpointError(RuntimeError):
    """The model endpoint cannot be reached or refused the request; the message says what to do.

    `transient`: the same request may well succeed later unchanged (the server down or restarting, busy, timed
    out, cut off mid-answer); a jorb waits and tries again by itself (jorbs/retry.py). Not transient: a refused
    key, an unknown model, a prompt too large, an answer past its limit: only a change of config or prompt helps."""

    def __init__(self, message: str, *, transient: bool = False):
        super().__init__(message)
        self.transient = transient


def causes(exc: BaseException | None, limit: int = 10) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or while handling, nearest first (at most `limit`): a library's error
    comes wrapped in its caller's (httpx's ConnectError around httpcore's, an HTTP client's around a server's)."""
    for _ in range(limit):
        if exc is None:
            return
        yield exc
        exc = exc.__cause__ or exc.__context__
