"""App "X" of seed 002's flow 11.3: a small web app with no API, driven through a real browser in the tests.

A login form, the records in a table with paging (4 a page), and an "Export all records" button that downloads
every record as a CSV (Content-Disposition: attachment). Pages need the session cookie the login sets. A record's
note can carry any text (the injection test puts an instruction there). Served on 127.0.0.1, port 0, in a thread.

By hand:  python -m tests.fakes.app_x --port 8080
"""

from __future__ import annotations

import argparse
import csv
import html
import io
import secrets
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.fakes.http_json import LocalServer

USER, PASSWORD = "ana", "s3cret"
PAGE_SIZE = 4


def default_records() -> list[dict[str, str]]:
    names = ["Alba", "Bruno", "Carla", "Dario", "Elena", "Fabio", "Gaia", "Hugo", "Irene", "Jonas"]
    return [{"id": str(i + 1), "name": n, "city": ["Lyon", "Porto", "Turin"][i % 3], "note": f"customer since {2015 + i}"}
            for i, n in enumerate(names)]


class AppX:
    def __init__(self, records: list[dict[str, str]] | None = None, title: str = "X records", help_url: str = ""):
        """help_url: a "Help" link on the login page (to another site, in a test)."""
        self.records = records if records is not None else default_records()
        self.title = title
        self.help_url = help_url
        self.sessions: set[str] = set()
        self.exports = 0
        self.logins = 0
        self.hits: list[str] = []
        self._server = LocalServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "AppX":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def csv_text(self) -> str:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=["id", "name", "city", "note"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.records)
        return out.getvalue()

    def _page(self, body: str) -> bytes:
        return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title></head>"
                f"<body><h1>{html.escape(self.title)}</h1>{body}</body></html>").encode()

    def _records_page(self, page: int) -> bytes:
        pages = max(1, -(-len(self.records) // PAGE_SIZE))
        page = min(max(page, 1), pages)
        rows = "".join(f"<tr><td>{html.escape(r['id'])}</td><td>{html.escape(r['name'])}</td>"
                       f"<td>{html.escape(r['city'])}</td><td>{html.escape(r['note'])}</td></tr>"
                       for r in self.records[(page - 1) * PAGE_SIZE:page * PAGE_SIZE])
        nav = []
        if page > 1:
            nav.append(f"<a href='/records?page={page - 1}'>Previous page</a>")
        if page < pages:
            nav.append(f"<a href='/records?page={page + 1}'>Next page</a>")
        return self._page(
            f"<p>Page {page} of {pages}, {len(self.records)} records</p>"
            "<table><thead><tr><th>Id</th><th>Name</th><th>City</th><th>Note</th></tr></thead>"
            f"<tbody>{rows}</tbody></table><nav>{' '.join(nav)}</nav>"
            "<form method='get' action='/export.csv'><button type='submit'>Export all records</button></form>")

    def _handler(self):
        app = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _session(self) -> bool:
                cookies = dict(part.strip().split("=", 1) for part in (self.headers.get("Cookie") or "").split(";")
                               if "=" in part)
                return cookies.get("xsession") in app.sessions

            def _send(self, status: int, body: bytes = b"", ctype: str = "text/html; charset=utf-8",
                      headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _login_page(self, error: str = "") -> None:
                message = f"<p role='alert'>{html.escape(error)}</p>" if error else ""
                self._send(200, app._page(
                    f"{message}<form method='post' action='/login'>"
                    "<label>User <input name='user' autocomplete='off'></label>"
                    "<label>Password <input name='password' type='password'></label>"
                    "<button type='submit'>Sign in</button></form>"
                    + (f"<a href='{html.escape(app.help_url)}'>Help</a>" if app.help_url else "")))

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                app.hits.append(url.path)
                if url.path == "/login":
                    return self._login_page()
                if not self._session():
                    return self._send(303, headers={"Location": "/login"})
                if url.path in ("/", "/records"):
                    page = parse_qs(url.query).get("page", ["1"])[0]
                    return self._send(200, app._records_page(int(page) if page.isdigit() else 1))
                if url.path == "/export.csv":
                    app.exports += 1
                    return self._send(200, app.csv_text().encode(), "text/csv; charset=utf-8",
                                      {"Content-Disposition": 'attachment; filename="records.csv"'})
                self._send(404, app._page("<p>Not found</p>"))

            def do_POST(self) -> None:  # noqa: N802
                if urlsplit(self.path).path != "/login":
                    return self._send(404)
                length = min(int(self.headers.get("Content-Length") or 0), 10_000)
                form = parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
                if form.get("user", [""])[0] != USER or form.get("password", [""])[0] != PASSWORD:
                    return self._login_page("Wrong user or password")
                app.logins += 1
                token = secrets.token_hex(16)
                app.sessions.add(token)
                self._send(303, headers={"Location": "/records", "Set-Cookie": f"xsession={token}; Path=/; HttpOnly"})

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    app = AppX()
    app._server.server_close()
    app._server = LocalServer(("127.0.0.1", args.port), app._handler())
    print(f"App X on {app.url} (user {USER}, password {PASSWORD})")
    app._server.serve_forever()


if __name__ == "__main__":
    main()
