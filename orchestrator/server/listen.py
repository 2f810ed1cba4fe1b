"""The socket `jarvis run` listens on and the uvicorn server over it, apart from the web app itself.

Kept apart from server/app.py (FastAPI, every view, the App) so that `jarvis run` can bind and answer its port
before importing any of that: see server/starting.py. Imports only the standard library, and uvicorn when a
server is made.
"""

from __future__ import annotations

import socket
from typing import Any

MAX_HEAD_BYTES = 64 * 1024  # a request's line and headers; the UI's are under 2 KB
MAX_CONCURRENT = 100  # connections and requests at once: every tab's streams and calls, with room to spare


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def uvicorn_server(app: Any) -> Any:
    """A uvicorn server for the ASGI `app`, run later with `server.run(sockets=[sock])`."""
    import uvicorn

    # log_config=None: uvicorn's records (an exception in a request, with its traceback) go to the root logger's
    # handlers, which mask secrets and write out escape sequences (core/secrets.ShownFormatter), not to its own
    # http="h11": httptools (uvicorn's default when installed) buffers a request line and headers of any size, and
    # the token is checked only once they are whole: 200 headers of 1 MB without a token grew the server by 200 MB.
    # h11 answers 400 and closes past MAX_HEAD_BYTES. limit_concurrency bounds the requests worked on at once
    # (each may hold a body of server.max_request_kb); past it a request gets 503.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5,
                            access_log=False, log_config=None, http="h11",
                            h11_max_incomplete_event_size=MAX_HEAD_BYTES, limit_concurrency=MAX_CONCURRENT)
    return uvicorn.Server(config)
