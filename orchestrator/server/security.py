"""What stands between the local web UI and everything else on the machine or the network.

- An access token (random, persisted under the data dir with mode 0600) that every API call must carry as
  `Authorization: Bearer TOKEN`. No cookie carries it: browsers keep cookies apart by host, not by port, so a
  cookie of 127.0.0.1:8765 went to every other server on 127.0.0.1 the browser visited, whoever runs it. The page
  itself holds the token instead, in its tab's sessionStorage (which is kept apart by origin, port included), and
  sends it as a header (server/web/api.js): opening the URL printed by `jarvis run` or `jarvis open`
  (`/?token=...`) hands it to the tab, which drops it from the address bar. A reload keeps it (so does a browser
  that restores its tabs after a restart, with their sessionStorage); a new tab opened by hand, or a browser
  restarted without its tabs, has none: the page then says to run `jarvis open` (cli/open_cmd.py).
  The page's shell (`/`, like `/static/`) holds no data and is served without the token; a wrong token in the
  URL is refused with a page saying where the right one is. A token cookie set by an earlier version is expired
  whenever the shell is served.
- The Host header must name the server as configured (a loopback name and the port), so a DNS-rebinding page
  (evil.example resolving to 127.0.0.1) is refused even though its requests reach the socket.
- The Origin header, when sent, must be the UI's own origin, and an API call's `Sec-Fetch-Site`, when sent, must
  be `same-origin` or `none` (the page itself, the address bar), so no web page the user visits, not even one on
  another port of this host, can drive the API. Other paths refuse only `cross-site`.
- Security headers (CSP without inline script, no framing, no referrer so the token never leaks).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import secrets
from html import escape as html_escape
from typing import Any
from urllib.parse import urlsplit

from orchestrator.core.config import Settings
from orchestrator.core.private_file import write_private
from orchestrator.core.server_identity import IDENTITY_PATH, TOKEN_FILE

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
PUBLIC_PREFIXES = ("/static/",)  # the UI's own code: no data in it, served without the token
# /healthz: up or down, nothing else, for whatever watches the service; /identity: proves this server holds the
# token without asking for it (core/server_identity.py)
PUBLIC_PATHS = ("/healthz", IDENTITY_PATH)
SHELL_PATH = "/"  # the page's shell: its code, no data; it brings the token from its tab's sessionStorage

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def load_or_create_token(settings: Settings) -> str:
    """The server's access token, created on first use and kept readable by the user only."""
    path = settings.data_path(TOKEN_FILE)
    if path.exists():
        token = path.read_text(encoding="utf-8").strip()
        if len(token) >= 32:
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
            return token
        log.warning("%s holds no usable token; writing a new one", path)
    token = secrets.token_urlsafe(32)
    write_private(path, token + "\n")
    return token


def is_loopback(host: str) -> bool:
    name = host.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def allowed_host_names(settings: Settings) -> set[str]:
    """The names the UI may be reached by: loopback names, the bound host (unless a wildcard) and extras."""
    names = set(LOOPBACK_NAMES)
    bound = settings.server.host
    if bound not in ("0.0.0.0", "::", ""):
        names.add(_bracket(bound))
    names.update(_bracket(h) for h in settings.server.allowed_hosts)
    return {n.lower() for n in names}


def legacy_cookie_name(port: int) -> str:
    """The token cookie earlier versions set: expired when the shell is served, never read."""
    return f"jarvis_token_{port}"


class Guard:
    """Checks one request's Host, Origin and token. `port` is the bound port (known after binding)."""

    def __init__(self, settings: Settings, token: str, port: int):
        self.token = token
        self.port = port
        self.names = allowed_host_names(settings)

    def allowed_authorities(self) -> set[str]:
        names = {f"{n}:{self.port}" for n in self.names}
        return names | self.names if self.port == 80 else names  # browsers leave out the default port

    def host_ok(self, host: str | None) -> bool:
        return bool(host) and host.lower() in self.allowed_authorities()

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser, or a same-origin GET: the token decides
        if origin == "null":
            return False
        parts = urlsplit(origin)
        return parts.scheme == "http" and parts.netloc.lower() in self.allowed_authorities()

    def token_ok(self, presented: str | None) -> bool:
        return bool(presented) and secrets.compare_digest(presented.encode(), self.token.encode())

    def presented_token(self, headers: dict[str, str]) -> str | None:
        """The token of `Authorization: Bearer`; a cookie is never read (any port of the host receives it)."""
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return None

    def expire_legacy_cookie_header(self) -> tuple[bytes, bytes]:
        value = f"{legacy_cookie_name(self.port)}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"
        return b"set-cookie", value.encode()


# Sec-Fetch-Site values an API call may carry: the UI's own page, the address bar or a bookmark. A page on another
# port of this host is "same-site", and some GETs have effects (GET /api/settings/health starts MCP servers): with
# the token in a header such a page has none to send, and this refuses it whatever it sends. Non-browsers send no
# Sec-Fetch-Site: the token decides.
API_FETCH_SITES = ("same-origin", "none")


def fetch_site_ok(path: str, site: str | None) -> bool:
    if site is None:
        return True
    if path.startswith("/api/"):
        return site in API_FETCH_SITES
    return site != "cross-site"


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


async def _refuse(send: Any, status: int, message: str, *, html: bool = False) -> None:
    if html:
        # A page in the UI's own style (its stylesheet is public), with the commands set as code.
        text = html_escape(message)
        text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
        body = ("<!doctype html><html lang=en><meta charset=utf-8><meta name=viewport content='width=device-width, "
                "initial-scale=1'><title>Jarvis</title><link rel=stylesheet href='/static/style.css'>"
                "<body><header class=top><span class=brand>Jarvis</span></header>"
                f"<main><section class='view'><div class='problem'><p>{text}</p></div></section></main>"
                "</body></html>").encode()
        ctype = b"text/html; charset=utf-8"
    else:
        body = json.dumps({"detail": message}).encode()
        ctype = b"application/json"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    """Pure ASGI middleware (streaming responses pass through untouched)."""

    def __init__(self, app: Any, guard_of: Any, own_tokens: tuple[str, ...] = ()):
        self.app = app
        self.guard_of = guard_of  # () -> Guard; the port is only known once the socket is bound
        # Paths whose app checks a token of its own (the MCP endpoint: each client's): Host, Origin and
        # Sec-Fetch-Site are still checked here, as for the API; the UI's token is neither needed nor enough.
        self.own_tokens = own_tokens

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        guard: Guard = self.guard_of()
        headers = _headers(scope)
        path = scope.get("path", "")
        own_token = path in self.own_tokens
        wants_html = not path.startswith("/api/") and not own_token
        if not guard.host_ok(headers.get("host")):
            log.warning("refused a request for host %r (allowed: %s)", headers.get("host"), sorted(guard.allowed_authorities()))
            await _refuse(send, 421, "This Jarvis only answers under its own address: run `jarvis open` (or add "
                                     "the name to server.allowed_hosts).", html=wants_html)
            return
        site_ok = fetch_site_ok("/api/" if own_token else path, headers.get("sec-fetch-site"))
        if not guard.origin_ok(headers.get("origin")) or not site_ok:
            log.warning("refused a cross-origin request from %r to %s", headers.get("origin"), path)
            await _refuse(send, 403, "Requests from other web sites are refused.", html=wants_html)
            return

        if path.startswith(PUBLIC_PREFIXES) or path in PUBLIC_PATHS or own_token:
            await self.app(scope, receive, _with_headers(send))
            return

        if path == SHELL_PATH:
            url_token = _query(scope).get("token")
            if url_token is not None and not guard.token_ok(url_token):
                await _refuse(send, 401, "That access token is not valid: run `jarvis open` to open Jarvis with "
                                         "its current one.", html=True)
                return
            # The page takes a token in its URL into its tab and drops it from the address bar (web/api.js).
            await self.app(scope, receive, _with_headers(send, guard.expire_legacy_cookie_header()))
            return

        if not guard.token_ok(guard.presented_token(headers)):
            await _refuse(send, 401, "Missing or wrong access token: run `jarvis open` to open Jarvis with it, "
                                     "or send Authorization: Bearer TOKEN.", html=wants_html)
            return
        await self.app(scope, receive, _with_headers(send))


def _query(scope: dict[str, Any]) -> dict[str, str]:
    from urllib.parse import parse_qs

    raw = scope.get("query_string", b"").decode("latin-1")
    return {k: v[0] for k, v in parse_qs(raw).items() if v}


def _with_headers(send: Any, *extra: tuple[bytes, bytes]) -> Any:
    """Add the security headers (and `extra`) to every response the app sends."""

    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            present = {k.lower() for k, _ in message.get("headers", [])}
            message = dict(message)
            message["headers"] = [*message.get("headers", []), *[h for h in SECURITY_HEADERS if h[0] not in present],
                                  *extra]
        await send(message)

    return wrapped
