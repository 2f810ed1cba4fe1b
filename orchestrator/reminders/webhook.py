"""Webhook target: POST the `reminder.fire` params as JSON.

Within one attempt, transport errors, timeouts, 429 and 5xx are retried with exponential backoff (tenacity);
when every try fails the attempt fails and the scheduler retries it later. Other 4xx answers say the request
itself is wrong, so the reminder fails at once with the status and the start of the body.

A webhook is someone else's server: each POST ends within `timeout_s` in all (not per read: one that answers a
byte at a time would hold a scheduler worker for good; core/pinned_dns.py's deadline), and no more than the start
of its answer is read (ANSWER_BYTES: only its status and the start of an error are used).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from orchestrator.core.errors import causes
from orchestrator.core.pinned_dns import NameLeadsHome, PinnedTransport, deadline, environment_proxies
from .models import Reminder
from .targets import DeliveryError

log = logging.getLogger(__name__)

ANSWER_BYTES = 4096  # of a webhook's answer, read at most


@dataclass(frozen=True)
class _Answer:
    status_code: int
    location: str | None
    text: str  # the start of the body


class _RetryableStatus(Exception):
    def __init__(self, response: _Answer):
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _leads_home(exc: BaseException) -> bool:
    """httpx raises its own ConnectError from httpcore's: the refusal is found in the chain."""
    return any(isinstance(e, NameLeadsHome) for e in causes(exc))


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, (httpx.TransportError, _RetryableStatus)) and not _leads_home(exc)


def _describe(exc: BaseException, url: str, timeout: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"webhook {url} did not answer within {timeout:g} s ({type(exc).__name__})"
    if isinstance(exc, _RetryableStatus):
        return f"webhook {url} answered HTTP {exc.response.status_code}: {exc.response.text[:200]!r}"
    if isinstance(exc, httpx.TransportError):
        return f"webhook {url} unreachable: {exc or type(exc).__name__}"
    return f"webhook {url}: {exc}"


class WebhookTarget:
    kind = "webhook"

    def __init__(self, timeout_s: float, tries: int, backoff_s: float = 0.5, max_backoff_s: float = 8.0):
        self.timeout_s = timeout_s
        self.tries = tries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        # a webhook named by a host name never reaches this machine or a link-local address through it, whatever
        # its DNS says when it fires (core/pinned_dns.py); a proxy from the environment still takes its URLs
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False,
                                    headers={"User-Agent": "jarvis-reminders/1"}, transport=PinnedTransport(),
                                    mounts=environment_proxies())

    def close(self) -> None:
        self._client.close()

    def _post_once(self, url: str, body: dict) -> _Answer:
        with deadline(self.timeout_s), self._client.stream("POST", url, json=body) as streamed:
            start = b""
            for chunk in streamed.iter_raw():
                start += chunk
                if len(start) >= ANSWER_BYTES:
                    break  # the rest is not read: the connection is closed, not drained
            response = _Answer(streamed.status_code, streamed.headers.get("location"),
                               start[:ANSWER_BYTES].decode("utf-8", "replace"))
        if response.status_code == 429 or response.status_code >= 500:
            raise _RetryableStatus(response)
        return response

    def fire(self, reminder: Reminder) -> None:
        url = reminder.webhook_url or ""
        body = reminder.fire_params()
        retrying = Retrying(stop=stop_after_attempt(self.tries), reraise=True, retry=retry_if_exception(_retryable),
                            wait=wait_exponential(multiplier=self.backoff_s, max=self.max_backoff_s))
        try:
            response = retrying(self._post_once, url, body)
        except (httpx.HTTPError, _RetryableStatus) as exc:
            if _leads_home(exc):  # refused, not failed: trying again would be refused again
                raise DeliveryError(f"webhook {url} not posted: {exc}", permanent=True) from None
            raise DeliveryError(_describe(exc, url, self.timeout_s) + f" ({self.tries} tries)") from None
        if 300 <= response.status_code < 400:
            raise DeliveryError(f"webhook {url} redirected (HTTP {response.status_code}) to "
                                f"{response.location!r}; give the final URL", permanent=True)
        if response.status_code >= 400:
            raise DeliveryError(f"webhook {url} refused the reminder: HTTP {response.status_code} "
                                f"{response.text[:200]!r}", permanent=True)
        log.info("reminder %s posted to %s (HTTP %s)", reminder.id, url, response.status_code)
