"""Replays model servers' recorded answers byte for byte, so the real ChatOpenAI client meets their exact shapes.

The answers live in tests/data/model_servers/*.json, one file per server, each naming where its shapes come from
(the server's own source or documentation). A request to
    http://127.0.0.1:PORT/<server>/<case>/v1/chat/completions
is answered with that case: `sse` (a list of events: an object is sent as `data: <json>`, a string is written as
it stands, e.g. "data: [DONE]" or a server's own `error: {...}` line), or `status` + `json` for a plain answer.
Every request body is kept per case in `server.requests[(server, case)]`; GET .../v1/models answers the file's
`models` listing.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from tests.fakes.http_json import JsonHandler, LocalServer

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "model_servers"


def load_fixtures() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}


class _Handler(JsonHandler):
    server: "ReplayServer._HTTPServer"

    def _route(self) -> tuple[dict[str, Any], str, str] | None:
        parts = self.path.strip("/").split("/")
        if len(parts) < 3:
            return None
        fixture = self.server.fixtures.get(parts[0])
        return (fixture, parts[0], parts[1]) if fixture else None

    def do_GET(self) -> None:  # noqa: N802
        route = self._route()
        if route is None or not self.path.rstrip("/").endswith("/models"):
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        self.send_json(200, route[0]["models"])

    def do_POST(self) -> None:  # noqa: N802
        route = self._route()
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if route is None or not self.path.endswith("/chat/completions"):
            self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        fixture, server_name, case_name = route
        case = next((c for c in fixture["cases"] if c["name"] == case_name), None)
        if case is None:
            self.send_json(404, {"error": {"message": f"no case {case_name}"}})
            return
        with self.server.lock:
            self.server.requests.setdefault((server_name, case_name), []).append(body)
        if "sse" not in case:
            self.send_json(case.get("status", 200), case["json"])
            return
        self.send_response(case.get("status", 200))
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in case["sse"]:
            line = event if isinstance(event, str) else "data: " + json.dumps(event, separators=(",", ":"))
            self.wfile.write(line.encode() + b"\n\n")
        self.wfile.flush()


class ReplayServer:
    """`with ReplayServer() as srv:` serves every fixture; `srv.base_url(server, case)` is the endpoint to use."""

    class _HTTPServer(LocalServer):
        daemon_threads = True
        fixtures: dict[str, dict[str, Any]]
        requests: dict[tuple[str, str], list[dict]]
        lock: threading.Lock

    def __init__(self) -> None:
        self._httpd = self._HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fixtures = load_fixtures()
        self._httpd.requests = {}
        self._httpd.lock = threading.Lock()
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def requests(self) -> dict[tuple[str, str], list[dict]]:
        return self._httpd.requests

    def base_url(self, server: str, case: str) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/{server}/{case}/v1"

    def __enter__(self) -> "ReplayServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
