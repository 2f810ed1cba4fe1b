"""The StartingApp `jarvis run` serves from its first second (server/starting.py), guarded as there (Host, Origin,
token), served by uvicorn on a free port in a thread; nothing is built until the test says so
(`shell.ready(app)` or `shell.failed(why)`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from orchestrator.server.listen import bind_socket, uvicorn_server
from orchestrator.server.security import Guard, GuardMiddleware
from orchestrator.server.starting import StartingApp


@contextmanager
def served_starting_app(settings: Any, token: str) -> Iterator[tuple[StartingApp, str, Guard]]:
    """(shell, base URL, guard); the socket listens before this yields, so a first request waits for the loop."""
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    guard = Guard(settings, token, port)
    shell = StartingApp(lambda inner: GuardMiddleware(inner, guard_of=lambda: guard))
    server = uvicorn_server(shell)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield shell, f"http://127.0.0.1:{port}", guard
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
