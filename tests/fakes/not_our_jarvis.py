"""Whatever took the port a Jarvis recorded (tests of `jarvis chat` through a running Jarvis and `jarvis open`): a
plain HTTP server that records every request and answers the identity challenge with nonsense, or, given a token,
with that token's proof (another data folder's Jarvis). Neither may ever be sent this folder's token."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from orchestrator.core.server_identity import proof


class NotOurJarvis:
    """`received`: (path, headers, body) of each request. `port` 0: any free one."""

    def __init__(self, token: str | None = None, port: int = 0):
        received: list[tuple[str, dict[str, str], str]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                received.append((self.path, dict(self.headers.items()), self.rfile.read(length).decode()))
                challenge = parse_qs(urlsplit(self.path).query).get("challenge", [""])[0]
                port = self.server.server_address[1]
                body = json.dumps({"service": "jarvis", "proof": proof(token, challenge, port) if token else "0" * 64})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_POST = _any

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def check_asked_without(self, token: str) -> None:
        """It was asked who it is, and no request carried `token` or an Authorization header."""
        assert self.received, "the recorded address was not even asked who it is"
        for path, headers, body in self.received:
            assert token not in f"{path}{json.dumps(headers)}{body}", (path, headers)
            assert "authorization" not in {k.lower() for k in headers}, headers

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def stale_record(data: Path, who: str) -> Iterator[NotOurJarvis | None]:
    """A stale address recorded in the data folder `data` (as `jarvis run` records its own): `who` "gone" (a port
    nothing listens on any more: None), "another folder's jarvis" (it proves another token) or anything else (a
    program that is no Jarvis)."""
    other = None if who == "gone" else NotOurJarvis("o" * 43 if who.startswith("another") else None)
    if other is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
    else:
        url = other.url
    (data / "server_url").write_text(url + "\n")
    try:
        yield other
    finally:
        if other is not None:
            other.close()
