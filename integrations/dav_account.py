"""Connections to one calendar (CalDAV) or contacts (CardDAV) account, with TLS that is never weakened and answers
read up to a bound.

Certificates are verified by default (the system's CAs, or a CA file the account names). A self-signed server is
pinned instead: urllib3 compares the certificate's SHA-256 right after the handshake, before the request (and so
the password) is written. There is no setting that turns verification off, and only https URLs are accepted.

Every answer is read up to MAX_RESPONSE_BYTES (a calendar or address book made huge, a vCard bomb, is refused with
a clear error instead of filling memory), and a connection that drops mid-answer is a ToolError that says nothing
was changed. The caldav library speaks the protocol over requests; this module only sets it up.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter

from .base import ToolError

MAX_RESPONSE_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class DavAccount:
    name: str
    kind: str  # "caldav" | "carddav"
    url: str
    user: str
    password: Callable[[], str]  # read from the keyring when a connection is made, not when the config loads
    calendar: str | None = None
    tls_fingerprint: str | None = None
    tls_ca_file: Path | None = None
    timeout_s: float = 30.0


class ResponseTooLarge(ToolError):
    """The server's answer was larger than Jarvis reads: nothing of it was used."""


class _Pinned(HTTPAdapter):
    """Every connection checks the server certificate's SHA-256 against the pin (urllib3's assert_fingerprint),
    after the handshake and before the request is sent."""

    def __init__(self, fingerprint: str):
        self.fingerprint = fingerprint
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["assert_fingerprint"] = self.fingerprint
        super().init_poolmanager(*args, **kwargs)


def _bounded(limit: int) -> Callable[..., requests.Response]:
    """A response hook (run before requests reads the body) that reads at most `limit` bytes of it."""

    def hook(response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            response.close()
            raise ResponseTooLarge(f"The server's answer is {int(declared)} bytes, more than the {limit} Jarvis reads "
                                   "in one answer: nothing of it was used. Narrow the request (a shorter window).")
        chunks, size = [], 0
        try:
            for chunk in response.raw.stream(65536, decode_content=True):
                size += len(chunk)
                if size > limit:
                    response.close()
                    raise ResponseTooLarge(f"The server's answer is larger than the {limit} bytes Jarvis reads in "
                                           "one answer: nothing of it was used. Narrow the request (a shorter window).")
                chunks.append(chunk)
        except urllib3.exceptions.ReadTimeoutError as exc:  # requests maps these only for bodies it reads itself
            raise requests.exceptions.ReadTimeout(exc) from None
        except urllib3.exceptions.HTTPError as exc:
            raise requests.exceptions.ChunkedEncodingError(exc) from None
        # a connection cut mid-answer: fewer bytes than announced, or (HTTP/1.0, cut in the headers) a multistatus
        # with no body at all; both read as a dropped connection, never as an empty calendar
        if declared.isdigit() and response.raw.tell() < int(declared):
            raise requests.exceptions.ChunkedEncodingError(
                f"the answer ended after {response.raw.tell()} of its {declared} bytes")
        if response.status_code == 207 and not size:
            raise requests.exceptions.ChunkedEncodingError("the answer ended before its body")
        response._content = b"".join(chunks)  # noqa: SLF001 - requests' own slot for a body already read
        response._content_consumed = True  # type: ignore[attr-defined]  # noqa: SLF001
        return response

    return hook


def dav_client(account: DavAccount, limit: int = MAX_RESPONSE_BYTES):  # noqa: ANN201 - a caldav.DAVClient
    """A caldav DAVClient for the account over verified (or pinned) TLS, its answers bounded."""
    import caldav

    if not account.url.startswith("https://"):
        raise ToolError(f"Account {account.name!r}: only https URLs are used ({account.url!r}).")
    verify: bool | str = str(account.tls_ca_file) if account.tls_ca_file else True
    if account.tls_fingerprint:
        verify = False  # the pin, checked by the adapter on every connection, is the trust
    client = caldav.DAVClient(account.url, username=account.user, password=account.password(),
                              timeout=int(account.timeout_s), ssl_verify_cert=verify)
    if account.tls_fingerprint:
        client.session.mount("https://", _Pinned(account.tls_fingerprint))
    client.session.hooks["response"].append(_bounded(limit))
    return client


def dav_error(account: DavAccount, exc: Exception, changed: str = "nothing was changed") -> ToolError:
    """What a failed exchange with the server means for the user, in one sentence."""
    import caldav.lib.error as dav_errors
    from lxml import etree

    where = f"The {'calendar' if account.kind == 'caldav' else 'contacts'} server of account {account.name!r}"
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, requests.exceptions.SSLError):
        return ToolError(f"{where}: TLS failed ({_reason(exc)}); nothing was sent. A server with a self-signed "
                         "certificate is pinned with tls_fingerprint, or trusted with tls_ca_file.")
    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError,
                        requests.exceptions.Timeout)):
        return ToolError(f"{where}: the connection dropped or timed out ({_reason(exc)}); {changed}. Try again.")
    if isinstance(exc, (AttributeError, etree.XMLSyntaxError)):  # caldav met an answer it could not parse
        return ToolError(f"{where} sent an answer that could not be read (cut or malformed: {_reason(exc)}); "
                         f"{changed}. Try again.")
    if isinstance(exc, dav_errors.AuthorizationError):
        return ToolError(f"{where} refused the login of {account.user!r}: check the user name and the app password "
                         "(jarvis secrets set).")
    if isinstance(exc, dav_errors.DAVError):
        return ToolError(f"{where} refused: {_reason(exc)}; {changed}.")
    return ToolError(f"{where}: {type(exc).__name__}: {_reason(exc)}; {changed}.")


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def quiet_pinned_warnings() -> None:
    """A pinned connection is verified by its fingerprint; urllib3's 'unverified HTTPS' warning would say otherwise."""
    from urllib3.exceptions import InsecureRequestWarning

    warnings.filterwarnings("ignore", category=InsecureRequestWarning)
