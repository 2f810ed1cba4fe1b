"""The parts the local protocol servers share: a quiet threading HTTP server, and a quiet HTTP/1.1 request handler
that answers JSON."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LocalServer(ThreadingHTTPServer):
    """A local protocol server: a client that drops its connection (a browser a test killed, an idle keep-alive
    connection closed with a reset) is no error worth a traceback in the test output. It stops within 20 ms of
    shutdown(): serve_forever's default checks every 0.5 s, and that wait was most of a test's teardown (about
    580 teardowns of 0.4-0.5 s in a full run)."""

    def serve_forever(self, poll_interval: float = 0.02) -> None:
        super().serve_forever(poll_interval)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:  # keep test output quiet
        pass

    def send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
