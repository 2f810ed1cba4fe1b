"""A small client for Google's REST APIs (Gmail, Calendar) over google-auth's AuthorizedSession.

- The credentials come from a loader passed in (the orchestrator keeps them in the keyring); none means
  "not configured", said in one sentence with the command that fixes it.
- AuthorizedSession refreshes the access token on a 401 and retries; a refreshed token is handed back to the
  saver so the next process starts with it.
- 429 (rate limit) is retried with exponential backoff (tenacity), honouring Retry-After; 5xx and dropped
  connections are retried only for requests that are safe to repeat (reads, or writes made idempotent).
- Base URLs come from the caller (config), so tests point them at a local fake server.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .base import ToolError
from .http_bounds import read_bounded

log = logging.getLogger(__name__)

NOT_CONFIGURED = ("Google is not connected yet: run `jarvis auth google` in a terminal to sign in, then ask again.")

CredentialsLoader = Callable[[], Any]  # -> google.oauth2.credentials.Credentials | None
CredentialsSaver = Callable[[Any], None]

_IDEMPOTENT = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}
_MAX_RETRY_AFTER_S = 60.0


class _Retry(Exception):
    def __init__(self, status: int | None, retry_after: float | None, detail: str):
        super().__init__(detail)
        self.status = status
        self.retry_after = retry_after


class GoogleApi:
    def __init__(
        self,
        base_url: str,
        load_credentials: CredentialsLoader,
        save_credentials: CredentialsSaver | None = None,
        *,
        service: str = "Google",
        timeout_s: float = 30.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        max_response_bytes: int = 100_000_000,  # a Gmail message is at most about 50 MB, 67 MB as base64 JSON
    ):
        self.base_url = base_url.rstrip("/")
        self._load = load_credentials
        self._save = save_credentials
        self.service = service
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_response_bytes = max_response_bytes
        self._session: Any = None
        self._token: str | None = None
        self._lock = threading.Lock()

    # -- session -----------------------------------------------------------------------------------
    def _get_session(self) -> Any:
        with self._lock:
            if self._session is None:
                from google.auth.transport.requests import AuthorizedSession

                creds = self._load()
                if creds is None:
                    raise ToolError(NOT_CONFIGURED)
                if not creds.valid and not getattr(creds, "refresh_token", None):
                    raise ToolError("The saved Google sign-in has expired and cannot be renewed: run "
                                    "`jarvis auth google` again.")
                self._session = AuthorizedSession(creds, refresh_timeout=self.timeout_s)
                self._token = creds.token
            return self._session

    def _persist_refresh(self, session: Any) -> None:
        token = session.credentials.token
        if token and token != self._token:
            self._token = token
            if self._save is not None:
                try:
                    self._save(session.credentials)
                except Exception:  # noqa: BLE001 - the call worked; only the cache of the token failed
                    log.warning("could not store the refreshed Google token", exc_info=True)

    def reset(self) -> None:
        """Forget the session (after `jarvis auth google` stored new credentials)."""
        with self._lock:
            self._session = None

    # -- requests ----------------------------------------------------------------------------------
    def request(self, method: str, path: str, *, params: dict[str, Any] | None = None, json: Any = None,
                idempotent: bool | None = None, what: str = "") -> Any:
        """One REST call; returns the decoded JSON body (None for 204). Raises ToolError with one sentence."""
        from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

        method = method.upper()
        safe = method in _IDEMPOTENT if idempotent is None else idempotent
        retrying = Retrying(
            retry=retry_if_exception_type(_Retry),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(method, path, params, json, safe, what)
        except _Retry as exc:
            if exc.status == 429:
                raise ToolError(f"{self.service} is rate-limiting Jarvis (HTTP 429, still after "
                                f"{self.max_retries} retries); try again in a minute.") from None
            raise ToolError(f"{self.service} is not answering properly ({exc}); try again later.") from None
        return None  # pragma: no cover - Retrying either returns or raises

    def _wait(self, state: Any) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retry) and exc.retry_after is not None:
            return min(exc.retry_after, _MAX_RETRY_AFTER_S)
        import random

        return self.backoff_s * (2 ** (state.attempt_number - 1)) * (0.5 + random.random() / 2)

    def _once(self, method: str, path: str, params: dict[str, Any] | None, body: Any, safe: bool, what: str) -> Any:
        import requests
        from google.auth.exceptions import RefreshError, TransportError

        session = self._get_session()
        url = self.base_url + path
        try:
            resp = read_bounded(session.request(method, url, params=params, json=body, timeout=self.timeout_s,
                                                stream=True), self.max_response_bytes, self.timeout_s,
                                f"{self.service}'s answer to {method} {path}")
        except RefreshError as exc:
            self.reset()
            raise ToolError(f"Google refused to renew Jarvis's access ({_short(exc)}): it may have been revoked; run "
                            "`jarvis auth google` again.") from None
        except TransportError as exc:  # raised while renewing the access token
            raise ToolError(f"Cannot reach Google's sign-in server to renew access ({_short(exc)[:80]}); check the "
                            "network connection.") from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            if safe:
                raise _Retry(None, None, f"cannot reach {self.base_url}: {type(exc).__name__}") from None
            raise ToolError(f"Cannot reach {self.service} at {self.base_url} ({type(exc).__name__}); check the "
                            "network connection. The request may not have been made.") from None
        self._persist_refresh(session)
        status = resp.status_code
        if status == 429 or (status >= 500 and safe):
            raise _Retry(status, _retry_after(resp), f"HTTP {status}")
        if status >= 400:
            raise ToolError(self._describe(resp, what))
        if status == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise ToolError(f"{self.service} answered something that is not JSON (HTTP {status}).") from None

    def _describe(self, resp: Any, what: str) -> str:
        status = resp.status_code
        try:
            err = resp.json().get("error") or {}
            message = err.get("message") if isinstance(err, dict) else str(err)
        except ValueError:
            message = None
        detail = f" ({message})" if message else ""
        if status == 401:
            self.reset()
            return f"{self.service} no longer accepts Jarvis's sign-in{detail}: run `jarvis auth google` again."
        if status == 403:
            return (f"{self.service} refused{detail}: Jarvis may lack the permission; run `jarvis auth google` again "
                    "to grant it.")
        if status == 404:
            return f"{what or 'That item'} was not found in {self.service}{detail}; check the id."
        if status == 409:
            return f"{self.service} reports a conflict{detail}."
        return f"{self.service} rejected the request (HTTP {status}){detail}."

    def paginate(self, path: str, params: dict[str, Any], items_key: str, limit: int, *,
                 page_size_param: str = "maxResults", page_cap: int = 100, what: str = "") -> Iterator[dict]:
        """Items across pages (nextPageToken), at most `limit` of them."""
        seen = 0
        token: str | None = None
        while seen < limit:
            query = dict(params)
            query[page_size_param] = min(page_cap, limit - seen)
            if token:
                query["pageToken"] = token
            page = self.request("GET", path, params=query, what=what) or {}
            for item in page.get(items_key) or []:
                yield item
                seen += 1
                if seen >= limit:
                    return
            token = page.get("nextPageToken")
            if not token:
                return


def _retry_after(resp: Any) -> float | None:
    value = resp.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime
        from datetime import datetime, timezone

        try:
            return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
        except (TypeError, ValueError):
            return None


def _short(exc: BaseException) -> str:
    text = str(exc.args[0] if exc.args else exc)
    return text.splitlines()[0][:150]
