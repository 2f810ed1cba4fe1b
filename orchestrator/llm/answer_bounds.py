"""A model server's answer is bounded in size and in time, whatever the server does.

`timeout_s` bounds each read, not the answer: a server that ignores max_tokens (llama-cpp-python ignores
`max_completion_tokens`) or loops on one token streams forever, one chunk well within the timeout after the
other, and everything it sends is kept in memory. A response hook of the model's HTTP clients wraps each
answer's byte stream: past `models.<role>.max_answer_kb` on the wire, or `models.<role>.answer_timeout_s` after
the request, the connection is closed and a ModelEndpointError says which limit stopped it (the planner and
`describe_endpoint_error` pass that sentence on; nothing of the cut answer is kept). Hooks, not a transport, so
the built-in server's clients (their own transports) are bounded the same way.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from orchestrator.core.config import EmbeddingsConfig, ModelConfig
from orchestrator.core.errors import ModelEndpointError


class _Limits:
    def __init__(self, cfg: ModelConfig | EmbeddingsConfig, base_url: str, role: str):
        self.max_bytes = cfg.max_answer_kb * 1024
        self.seconds = cfg.answer_timeout_s
        self.base_url = base_url
        self.role = role

    def check(self, seen: int, started: float) -> None:
        if seen > self.max_bytes:
            why = ("" if self.role == "embeddings" else " The server may be ignoring max_tokens: set a token limit "
                   "on the server itself, or raise the limit.")
            raise ModelEndpointError(
                f"The model at {self.base_url} sent more than {self.max_bytes // 1024} KB without finishing its "
                f"answer (models.{self.role}.max_answer_kb), so it was stopped and nothing of it was kept.{why}")
        if time.monotonic() - started > self.seconds:
            raise ModelEndpointError(
                f"The model at {self.base_url} was still answering after {self.seconds:g} s "
                f"(models.{self.role}.answer_timeout_s), so it was stopped and nothing of it was kept. Ask for "
                "a shorter answer, set max_tokens, or raise the limit for a slow model.")


class _BoundedStream:
    def __init__(self, inner: Any, limits: _Limits, started: float):
        self.inner, self.limits, self.started = inner, limits, started

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        for chunk in self.inner:
            seen += len(chunk)
            try:
                self.limits.check(seen, self.started)
            except ModelEndpointError:
                self.inner.close()  # the server sees the connection go and can stop generating
                raise
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _AsyncBoundedStream:
    def __init__(self, inner: Any, limits: _Limits, started: float):
        self.inner, self.limits, self.started = inner, limits, started

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            seen += len(chunk)
            try:
                self.limits.check(seen, self.started)
            except ModelEndpointError:
                await self.inner.aclose()
                raise
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


@functools.cache
def _stream_class(package: str, asynchronous: bool) -> type:
    """The wrapper as a byte stream of the response's own HTTP package: the openai SDK may bring its own copy of
    httpx (httpx2), which checks the stream against its own classes; the built-in server's clients are httpx's."""
    module = importlib.import_module(package)
    if asynchronous:
        return type("AsyncBoundedStream", (_AsyncBoundedStream, module.AsyncByteStream), {})
    return type("BoundedStream", (_BoundedStream, module.SyncByteStream), {})


def _wrap(response: Any, limits: _Limits, asynchronous: bool) -> None:
    started = response.request.extensions.get("jarvis_started", time.monotonic())
    cls = _stream_class(type(response).__module__.split(".")[0], asynchronous)
    response.stream = cls(response.stream, limits, started)


def _mark_start(request: httpx.Request) -> None:
    request.extensions["jarvis_started"] = time.monotonic()


def bound_client(client: httpx.Client, cfg: ModelConfig | EmbeddingsConfig, base_url: str, role: str) -> httpx.Client:
    """Add the hooks that bound every answer of this client (the embeddings', one side of the chat model's)."""
    limits = _Limits(cfg, base_url, role)
    client.event_hooks["request"].append(_mark_start)
    client.event_hooks["response"].append(lambda response: _wrap(response, limits, asynchronous=False))
    return client


def bound_answers(clients: tuple[httpx.Client, httpx.AsyncClient], cfg: ModelConfig, base_url: str,
                  role: str) -> tuple[httpx.Client, httpx.AsyncClient]:
    """Add the hooks that bound every answer of these clients (the chat model's) to cfg's limits."""
    limits = _Limits(cfg, base_url, role)
    sync_client, async_client = clients

    async def on_request_async(request: httpx.Request) -> None:
        _mark_start(request)

    async def on_response_async(response: httpx.Response) -> None:
        _wrap(response, limits, asynchronous=True)

    async_client.event_hooks["request"].append(on_request_async)
    async_client.event_hooks["response"].append(on_response_async)
    return bound_client(sync_client, cfg, base_url, role), async_client
