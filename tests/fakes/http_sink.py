"""A local HTTP server that records POSTs, for webhook tests.

Each path can be told how to answer: a list of status codes used in turn (the last one repeats), "hang" (read
the request, then never answer until the server stops), "trickle" (answer 200 one byte of its headers every 0.1 s,
for up to a minute: each read gets a byte in time, the answer never ends), or "huge" (answer 200 with a 64 MiB
body; `sent[path]` counts the bytes the client took before it hung up).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from tests.fakes.http_json import LocalServer


class HttpSink:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.behaviour: dict[str, list[int] | str] = {}
        self.sent: dict[str, int] = {}  # bytes of a "huge" answer written, by path
        self._released = threading.Event()
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                with sink._lock:
                    sink.requests.append({"path": self.path, "body": body, "at": time.monotonic(),
                                          "content_type": self.headers.get("Content-Type")})
                    plan = sink.behaviour.get(self.path, [200])
                    if isinstance(plan, list):
                        status = plan.pop(0) if len(plan) > 1 else plan[0]
                if plan == "hang":
                    sink._released.wait(60)
                    return
                if plan in ("trickle", "huge"):
                    self._stream(plan)
                    return
                payload = b'{"ok": true}' if status < 400 else b'{"error": "nope"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, plan: str) -> None:
                try:
                    if plan == "trickle":
                        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 600:
                            if sink._released.wait(0.1):
                                return
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                        return
                    size, chunk = 64 << 20, b"x" * (64 << 10)
                    self.send_response(200)
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    for _ in range(size // len(chunk)):
                        self.wfile.write(chunk)
                        sink.sent[self.path] = sink.sent.get(self.path, 0) + len(chunk)
                except OSError:  # the client hung up
                    pass

        self.server = LocalServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def posts(self, path: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if r["path"] == path]

    def __enter__(self) -> "HttpSink":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._released.set()
        self.server.shutdown()
        self.server.server_close()
