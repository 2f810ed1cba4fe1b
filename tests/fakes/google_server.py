"""A local stand-in for Google: the OAuth endpoints, and the Gmail and Calendar REST subset Jarvis uses.

It speaks the real wire protocol (paths, query parameters, JSON shapes, Bearer tokens, nextPageToken), so
the production clients (google-auth's AuthorizedSession, google-auth-oauthlib's flow) run unchanged against
it; only the base URLs differ. Test levers:
  server.expire_tokens()                 every access token now gets 401 -> the client must refresh
  server.fail(method, path_re, status, times=1, retry_after=None)   inject 429 / 5xx answers
  server.fail(..., after=True)           do the work, then answer the error (a reply lost on the way back)
  server.page_size                       items per page (small, to exercise pagination)
  server.requests                        (method, path, query, authorization) of every request
  server.add_message(...)                mailbox content; server.sent / server.drafts / server.events
By hand: python -m tests.fakes.google_server --port 8090
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email import message_from_bytes
from email.utils import format_datetime, getaddresses
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

from tests.fakes.http_json import LocalServer

CLIENT_ID = "jarvis-test-client.apps.example"
CLIENT_SECRET = "test-client-secret"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@dataclass
class Fault:
    method: str
    path: re.Pattern
    status: int
    times: int
    retry_after: float | None = None
    after: bool = False  # process the request, then answer the error


@dataclass
class GoogleState:
    me: str = "me@example.com"
    page_size: int = 2
    access_tokens: dict[str, float] = field(default_factory=dict)  # token -> expiry (epoch)
    refresh_tokens: set[str] = field(default_factory=set)
    codes: dict[str, str] = field(default_factory=dict)  # code -> redirect_uri
    messages: dict[str, dict] = field(default_factory=dict)
    drafts: dict[str, dict] = field(default_factory=dict)
    sent: list[dict] = field(default_factory=list)
    events: dict[str, list[dict]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str, dict, str]] = field(default_factory=list)
    refreshes: int = 0


class FakeGoogle:
    class _HTTPServer(LocalServer):
        daemon_threads = True
        allow_reuse_address = True
        fake: "FakeGoogle"

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.state = GoogleState()
        self.lock = threading.RLock()
        self.httpd = self._HTTPServer((host, port), _Handler)
        self.httpd.fake = self
        self.host, self.port = self.httpd.server_address[:2]
        self._counter = 0

    # -- addresses ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def token_uri(self) -> str:
        return self.url + "/token"

    def client_secrets(self) -> dict:
        return {"installed": {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "auth_uri": self.url + "/o/oauth2/auth",
                              "token_uri": self.token_uri, "redirect_uris": ["http://localhost"]}}

    # -- levers ------------------------------------------------------------------------------------
    @property
    def requests(self) -> list[tuple[str, str, dict, str]]:
        return self.state.requests

    @property
    def page_size(self) -> int:
        return self.state.page_size

    @page_size.setter
    def page_size(self, value: int) -> None:
        self.state.page_size = value

    def next_id(self, prefix: str) -> str:
        with self.lock:
            self._counter += 1
            return f"{prefix}{self._counter:04d}"

    def issue_tokens(self, lifetime_s: float = 3600) -> dict:
        """A signed-in user's tokens, as the token endpoint would grant them."""
        with self.lock:
            access, refresh = "ya29." + secrets.token_urlsafe(16), "1//" + secrets.token_urlsafe(16)
            self.state.access_tokens[access] = time.time() + lifetime_s
            self.state.refresh_tokens.add(refresh)
            return {"access_token": access, "refresh_token": refresh, "expires_in": int(lifetime_s),
                    "token_type": "Bearer", "scope": " ".join(_SCOPES)}

    def authorized_user_info(self) -> dict:
        """What google.oauth2.credentials.Credentials.to_json() holds after a sign-in against this server."""
        tokens = self.issue_tokens()
        expiry = datetime.fromtimestamp(time.time() + 3600, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return {"token": tokens["access_token"], "refresh_token": tokens["refresh_token"], "token_uri": self.token_uri,
                "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "scopes": _SCOPES, "expiry": expiry}

    def expire_tokens(self) -> None:
        with self.lock:
            self.state.access_tokens.clear()

    def revoke(self) -> None:
        with self.lock:
            self.state.access_tokens.clear()
            self.state.refresh_tokens.clear()

    def fail(self, method: str, path_re: str, status: int, times: int = 1, retry_after: float | None = None,
             after: bool = False) -> None:
        with self.lock:
            self.state.faults.append(Fault(method.upper(), re.compile(path_re), status, times, retry_after, after))

    def add_message(self, *, sender: str, subject: str, body: str, to: str | None = None, thread_id: str | None = None,
                    unread: bool = True, html: bool = False, message_id: str | None = None,
                    date: datetime | None = None, authentication_results: str | list[str] | None = None) -> dict:
        """authentication_results: the `Authentication-Results` header Gmail adds (RFC 8601), e.g.
        "mx.google.com; dkim=pass header.i=@example.com; spf=pass smtp.mailfrom=alice@example.com; dmarc=pass"."""
        with self.lock:
            mid = self.next_id("m")
            tid = thread_id or self.next_id("t")
            when = date or datetime.now(timezone.utc)
            headers = [{"name": "From", "value": sender}, {"name": "To", "value": to or self.state.me},
                       {"name": "Subject", "value": subject}, {"name": "Date", "value": format_datetime(when)},
                       {"name": "Message-ID", "value": message_id or f"<{mid}@mail.example>"}]
            stamps = [authentication_results] if isinstance(authentication_results, str) else authentication_results
            # the receiving server's own stamp comes first (on top); the ones after it came with the message
            headers[:0] = [{"name": "Authentication-Results", "value": v} for v in stamps or []]
            mime = "text/html" if html else "text/plain"
            msg = {"id": mid, "threadId": tid, "labelIds": ["INBOX"] + (["UNREAD"] if unread else []),
                   "snippet": re.sub(r"<[^>]+>", "", body)[:100], "internalDate": str(int(when.timestamp() * 1000)),
                   "payload": {"mimeType": "multipart/alternative", "headers": headers,
                               "parts": [{"mimeType": mime, "filename": "", "body": {"data": _b64(body.encode())}}]}}
            self.state.messages[mid] = msg
            return msg

    def add_event(self, calendar: str, summary: str, start: str, end: str) -> dict:
        with self.lock:
            ev = {"id": self.next_id("ev"), "summary": summary, "start": {"dateTime": start}, "end": {"dateTime": end},
                  "status": "confirmed", "htmlLink": f"{self.url}/calendar/event"}
            self.state.events.setdefault(calendar, []).append(ev)
            return ev

    @property
    def sent(self) -> list[dict]:
        return self.state.sent

    @property
    def drafts(self) -> dict[str, dict]:
        return self.state.drafts

    def events(self, calendar: str = "primary") -> list[dict]:
        return self.state.events.get(calendar, [])

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> "FakeGoogle":
        threading.Thread(target=self.httpd.serve_forever, name="fake-google", daemon=True).start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FakeGoogle":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


_SCOPES = [
    "https://www.googleapis.com/auth/gmail.readonly",
    "https://www.googleapis.com/auth/gmail.compose",
    "https://www.googleapis.com/auth/calendar.events",
    "https://www.googleapis.com/auth/calendar.readonly",
]


def _match_query(msg: dict, query: str) -> bool:
    """A small part of Gmail's search syntax: from:, to:, subject:, is:unread, and free words."""
    headers = {h["name"].lower(): h["value"].lower() for h in msg["payload"]["headers"]}
    body = " ".join(base64.urlsafe_b64decode(p["body"]["data"] + "==").decode(errors="replace").lower()
                    for p in msg["payload"].get("parts", []) if p["body"].get("data"))
    for term in re.findall(r'(\w+:"[^"]*"|\w+:\S+|"[^"]*"|\S+)', query.lower()):
        if ":" in term and not term.startswith('"'):
            key, value = term.split(":", 1)
            value = value.strip('"')
            if key == "is":
                if value == "unread" and "UNREAD" not in msg["labelIds"]:
                    return False
                continue
            if key in ("from", "to", "subject") and value not in headers.get(key, ""):
                return False
            continue
        word = term.strip('"')
        if word not in headers.get("subject", "") and word not in body and word not in headers.get("from", ""):
            return False
    return True


class _Handler(BaseHTTPRequestHandler):
    server: FakeGoogle._HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    # -- plumbing ----------------------------------------------------------------------------------
    @property
    def fake(self) -> FakeGoogle:
        return self.server.fake

    _after_fault: Fault | None = None

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        fault, self._after_fault = self._after_fault, None
        if fault is not None:  # the work is done; the answer is "lost"
            status, headers = fault.status, None
            body = {"error": {"code": status, "message": "injected fault after processing", "status": "backendError"}}
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json; charset=UTF-8")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, reason: str = "error", headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"code": status, "message": message, "status": reason,
                                      "errors": [{"message": message, "reason": reason}]}}, headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        parsed = urlparse(self.path)
        query = {k: v if len(v) > 1 else v[0] for k, v in parse_qs(parsed.query).items()}
        fake = self.fake
        with fake.lock:
            fake.state.requests.append((method, parsed.path, query, self.headers.get("Authorization", "")))
            for fault in fake.state.faults:
                if fault.times > 0 and fault.method == method and fault.path.search(parsed.path):
                    fault.times -= 1
                    if fault.after:
                        self._after_fault = fault
                        break
                    headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
                    self._body()
                    self._error(fault.status, "injected fault", "rateLimitExceeded" if fault.status == 429 else "backendError",
                                headers)
                    return
        body = self._body()
        if parsed.path == "/o/oauth2/auth" and method == "GET":
            return self._authorize(query)
        if parsed.path == "/token" and method == "POST":
            return self._token(body)
        if not self._authorized():
            return self._error(401, "Request had invalid authentication credentials.", "UNAUTHENTICATED",
                               {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/", error="invalid_token"'})
        payload = json.loads(body) if body else None
        for pattern, handler_name in _ROUTES.get(method, []):
            m = re.fullmatch(pattern, parsed.path)
            if m:
                with fake.lock:
                    return getattr(self, handler_name)(*m.groups(), query=query, body=payload)
        self._error(404, f"no route {method} {parsed.path}", "notFound")

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        with self.fake.lock:
            expiry = self.fake.state.access_tokens.get(token)
        return expiry is not None and expiry > time.time()

    # -- OAuth -------------------------------------------------------------------------------------
    def _authorize(self, query: dict) -> None:
        """The consent screen, approved at once: redirect back with a code (what the user's browser does)."""
        if query.get("client_id") != CLIENT_ID:
            return self._error(400, "invalid_client")
        code = "4/" + secrets.token_urlsafe(12)
        with self.fake.lock:
            self.fake.state.codes[code] = query.get("redirect_uri", "")
        target = query.get("redirect_uri", "") + "?" + urlencode({"code": code, "state": query.get("state", ""),
                                                                   "scope": query.get("scope", "")})
        self.send_response(302)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _token(self, body: bytes) -> None:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        basic = self.headers.get("Authorization", "")
        if basic.startswith("Basic "):
            cid, _, csecret = base64.b64decode(basic[6:]).decode().partition(":")
            form.setdefault("client_id", cid)
            form.setdefault("client_secret", csecret)
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return self._send(401, {"error": "invalid_client", "error_description": "The OAuth client was not found."})
        grant = form.get("grant_type")
        fake = self.fake
        with fake.lock:
            if grant == "authorization_code":
                if fake.state.codes.pop(form.get("code", ""), None) is None:
                    return self._send(400, {"error": "invalid_grant", "error_description": "Malformed auth code."})
                return self._send(200, fake.issue_tokens())
            if grant == "refresh_token":
                if form.get("refresh_token") not in fake.state.refresh_tokens:
                    return self._send(400, {"error": "invalid_grant", "error_description": "Token has been expired or revoked."})
                fake.state.refreshes += 1
                access = "ya29." + secrets.token_urlsafe(16)
                fake.state.access_tokens[access] = time.time() + 3600
                return self._send(200, {"access_token": access, "expires_in": 3600, "token_type": "Bearer",
                                        "scope": " ".join(_SCOPES)})
        self._send(400, {"error": "unsupported_grant_type"})

    # -- Gmail -------------------------------------------------------------------------------------
    def _page(self, items: list, query: dict, key: str, extra: dict | None = None) -> None:
        start = int(query.get("pageToken") or 0)
        size = min(int(query.get("maxResults") or 100), self.fake.state.page_size)
        page = items[start:start + size]
        out: dict[str, Any] = {key: page, **(extra or {})}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        self._send(200, out)

    def gmail_profile(self, *, query: dict, body: Any) -> None:
        self._send(200, {"emailAddress": self.fake.state.me, "messagesTotal": len(self.fake.state.messages)})

    def gmail_list(self, *, query: dict, body: Any) -> None:
        q = query.get("q") or ""
        found = sorted((m for m in self.fake.state.messages.values() if _match_query(m, q)),
                       key=lambda m: -int(m["internalDate"]))
        self._page([{"id": m["id"], "threadId": m["threadId"]} for m in found], query, "messages",
                   {"resultSizeEstimate": len(found)})

    def _shaped(self, msg: dict, fmt: str, wanted: Any = None) -> dict:
        if fmt == "metadata":
            names = {n.lower() for n in ([wanted] if isinstance(wanted, str) else wanted or [])}
            headers = [h for h in msg["payload"]["headers"] if not names or h["name"].lower() in names]
            return {**{k: v for k, v in msg.items() if k != "payload"},
                    "payload": {"mimeType": msg["payload"]["mimeType"], "headers": headers}}
        return msg

    def gmail_message(self, mid: str, *, query: dict, body: Any) -> None:
        msg = self.fake.state.messages.get(mid)
        if msg is None:
            return self._error(404, "Requested entity was not found.", "notFound")
        self._send(200, self._shaped(msg, query.get("format", "full"), query.get("metadataHeaders")))

    def gmail_thread(self, tid: str, *, query: dict, body: Any) -> None:
        msgs = sorted((m for m in self.fake.state.messages.values() if m["threadId"] == tid), key=lambda m: int(m["internalDate"]))
        if not msgs:
            return self._error(404, "Requested entity was not found.", "notFound")
        fmt = query.get("format", "full")
        self._send(200, {"id": tid, "historyId": "1", "messages": [self._shaped(m, fmt, query.get("metadataHeaders")) for m in msgs]})

    def gmail_draft_create(self, *, query: dict, body: Any) -> None:
        message = (body or {}).get("message") or {}
        raw = message.get("raw")
        if not raw:
            return self._error(400, "Invalid draft: message.raw is required", "invalidArgument")
        parsed = message_from_bytes(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
        did = self.fake.next_id("r")
        headers = [{"name": k, "value": str(v)} for k, v in parsed.items()]
        text = next((p.get_payload(decode=True).decode(errors="replace") for p in parsed.walk()
                     if p.get_content_type() == "text/plain"), "")
        draft = {"id": did, "message": {"id": self.fake.next_id("dm"), "threadId": message.get("threadId"),
                                        "labelIds": ["DRAFT"], "raw": raw, "snippet": " ".join(text.split())[:100],
                                        "payload": {"mimeType": parsed.get_content_type(),
                                                                                      "headers": headers}}}
        self.fake.state.drafts[did] = draft
        self._send(200, {"id": did, "message": {"id": draft["message"]["id"], "threadId": message.get("threadId"),
                                                "labelIds": ["DRAFT"]}})

    def gmail_draft_get(self, did: str, *, query: dict, body: Any) -> None:
        draft = self.fake.state.drafts.get(did)
        if draft is None:
            return self._error(404, "Requested entity was not found.", "notFound")
        msg = draft["message"]
        self._send(200, {"id": did, "message": {k: v for k, v in msg.items() if k != "raw"}})

    def gmail_draft_send(self, *, query: dict, body: Any) -> None:
        did = (body or {}).get("id")
        draft = self.fake.state.drafts.pop(did or "", None)
        if draft is None:
            return self._error(404, "Requested entity was not found.", "notFound")
        msg = draft["message"]
        sent = {"id": self.fake.next_id("s"), "threadId": msg.get("threadId") or self.fake.next_id("t"),
                "labelIds": ["SENT"], "raw": msg["raw"],
                "to": [a for _, a in getaddresses([h["value"] for h in msg["payload"]["headers"] if h["name"] == "To"])]}
        self.fake.state.sent.append(sent)
        # As in Gmail, the sent message joins its thread (a new one when the draft started a conversation).
        self.fake.state.messages[sent["id"]] = {
            "id": sent["id"], "threadId": sent["threadId"], "labelIds": ["SENT"], "snippet": "",
            "internalDate": str(int(datetime.now(timezone.utc).timestamp() * 1000)),
            "payload": {**msg["payload"], "headers": [*msg["payload"]["headers"],
                                                        {"name": "From", "value": self.fake.state.me}]}}
        self._send(200, {k: v for k, v in sent.items() if k in ("id", "threadId", "labelIds")})

    # -- Calendar ----------------------------------------------------------------------------------
    def cal_list(self, cal: str, *, query: dict, body: Any) -> None:
        lo = _dt(query.get("timeMin")) if query.get("timeMin") else None
        hi = _dt(query.get("timeMax")) if query.get("timeMax") else None
        items = []
        for ev in self.fake.state.events.get(cal, []):
            start, end = _dt(_when(ev["start"])), _dt(_when(ev["end"]))
            if (hi is None or start < hi) and (lo is None or end > lo):
                items.append(ev)
        items.sort(key=lambda e: _dt(_when(e["start"])))
        self._page(items, query, "items", {"kind": "calendar#events", "summary": cal, "timeZone": "UTC"})

    def cal_insert(self, cal: str, *, query: dict, body: Any) -> None:
        ev = dict(body or {})
        if not ev.get("start") or not ev.get("end"):
            return self._error(400, "Missing end time.", "required")
        existing = self.fake.state.events.setdefault(cal, [])
        if ev.get("id"):
            if not re.fullmatch(r"[a-v0-9]{5,1024}", ev["id"]):
                return self._error(400, "Invalid resource id value.", "invalid")
            if any(e["id"] == ev["id"] for e in existing):
                return self._error(409, "The requested identifier already exists.", "duplicate")
        else:
            ev["id"] = self.fake.next_id("ev")
        ev.update({"status": "confirmed", "htmlLink": f"{self.fake.url}/calendar/event?eid={ev['id']}",
                   "created": datetime.now(timezone.utc).isoformat()})
        existing.append(ev)
        self._send(200, ev)

    def cal_get(self, cal: str, eid: str, *, query: dict, body: Any) -> None:
        for ev in self.fake.state.events.get(cal, []):
            if ev["id"] == eid:
                return self._send(200, ev)
        self._error(404, "Not Found", "notFound")

    def cal_freebusy(self, *, query: dict, body: Any) -> None:
        lo, hi = _dt(body["timeMin"]), _dt(body["timeMax"])
        calendars = {}
        for item in body.get("items") or []:
            busy = []
            for ev in self.fake.state.events.get(item["id"], []):
                start, end = _dt(_when(ev["start"])), _dt(_when(ev["end"]))
                if start < hi and end > lo:
                    busy.append({"start": max(start, lo).astimezone(timezone.utc).isoformat().replace("+00:00", "Z"),
                                 "end": min(end, hi).astimezone(timezone.utc).isoformat().replace("+00:00", "Z")})
            calendars[item["id"]] = {"busy": sorted(busy, key=lambda b: b["start"])}
        self._send(200, {"kind": "calendar#freeBusy", "timeMin": body["timeMin"], "timeMax": body["timeMax"],
                         "calendars": calendars})


def _when(part: dict) -> str:
    return part.get("dateTime") or (part["date"] + "T00:00:00+00:00")


def _dt(value: str) -> datetime:
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


_ROUTES: dict[str, list[tuple[str, str]]] = {
    "GET": [
        (r"/gmail/v1/users/me/profile", "gmail_profile"),
        (r"/gmail/v1/users/me/messages", "gmail_list"),
        (r"/gmail/v1/users/me/messages/([^/]+)", "gmail_message"),
        (r"/gmail/v1/users/me/threads/([^/]+)", "gmail_thread"),
        (r"/gmail/v1/users/me/drafts/([^/]+)", "gmail_draft_get"),
        (r"/calendar/v3/calendars/([^/]+)/events", "cal_list"),
        (r"/calendar/v3/calendars/([^/]+)/events/([^/]+)", "cal_get"),
    ],
    "POST": [
        (r"/gmail/v1/users/me/drafts", "gmail_draft_create"),
        (r"/gmail/v1/users/me/drafts/send", "gmail_draft_send"),
        (r"/calendar/v3/calendars/([^/]+)/events", "cal_insert"),
        (r"/calendar/v3/freeBusy", "cal_freebusy"),
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description="A local fake of Google's OAuth, Gmail and Calendar endpoints.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    fake = FakeGoogle(args.host, args.port)
    fake.add_message(sender="Alice <alice@example.com>", subject="Q3 report", body="Can you review the Q3 report by Friday?")
    print(f"fake Google on {fake.url} (token endpoint {fake.token_uri})", flush=True)
    try:
        fake.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
