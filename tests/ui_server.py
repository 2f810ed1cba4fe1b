"""The web UI server for tests: the real app on a real socket (uvicorn in a thread), over an isolated Jarvis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import JarvisEnv


@dataclass
class UIServer:
    url: str
    token: str
    app: Any
    env: JarvisEnv

    @property
    def host(self) -> str:
        return self.url.split("//", 1)[1]

    def client(self, *, token: str | None = None, **headers: str) -> httpx.Client:
        auth = {"Authorization": f"Bearer {token or self.token}"} if token != "" else {}
        return httpx.Client(base_url=self.url, headers={**auth, **headers}, timeout=30)

    def stream(self, path: str, body: Any = None, method: str = "POST",
               into: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The SSE events of one call, parsed; appended to `into` as they arrive when given (a test in another
        thread can wait for one)."""
        events = [] if into is None else into
        with self.client() as c, c.stream(method, path, json=body) as resp:
            assert resp.status_code == 200, resp.read().decode()
            assert resp.headers["content-type"].startswith("text/event-stream")
            events.extend(iter_sse(resp.iter_text()))
        return events


def iter_sse(chunks) -> Iterator[dict[str, Any]]:
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        while "\n\n" in buffer:
            frame, buffer = buffer.split("\n\n", 1)
            data = "\n".join(line[5:].lstrip() for line in frame.splitlines() if line.startswith("data:"))
            if data:
                yield json.loads(data)


def parse_sse(chunks) -> list[dict[str, Any]]:
    return list(iter_sse(chunks))


@contextmanager
def start_ui(env: JarvisEnv, tools: list | None = None, services: list[str] | None = None) -> Iterator[UIServer]:
    from orchestrator.server.app import create_app, serve_in_thread

    jarvis = env.app(tools=tools) if tools else env.app()
    app = create_app(jarvis, services=services or [])
    with serve_in_thread(app) as url:
        yield UIServer(url, app.state.token, app, env)


@pytest.fixture
def ui_server(jarvis_env: JarvisEnv) -> Iterator[UIServer]:
    with start_ui(jarvis_env) as server:
        yield server
