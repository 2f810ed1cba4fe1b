"""The `email` channel through Gmail: sending is a draft sent at once (side effect `email_send`, so the
autonomy policy for email applies), in the same Gmail thread as the conversation so far; replies are found by
polling the threads jorbs wait on (`channels.email.poll_interval_s`) and routed by thread to their jorb.
`email_channel` and `email_poller` give the channel on the IMAP account `channels.email.account` names instead
(channels/email_imap.py), else on Gmail: every user of the channel goes through them."""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any

from integrations.base import ToolError
from integrations.gmail_tools import message_body
from integrations.mail_auth import server_vouches
from integrations.mail_headers import UnsafeMessage, checked_bytes, message_ids, plain_subject

from orchestrator.core.config import Settings
from orchestrator.tools.google_auth import google_api
from .addresses import mailbox_of
from .base import ChannelError, Sent
from .inbound import InboundMessage
from .models import ChannelState

log = logging.getLogger(__name__)

API = "/gmail/v1/users/me"
HOW_TO = ("email is not configured: run `jarvis auth google` (Gmail) or `jarvis accounts add NAME` (any IMAP/SMTP "
          "account), then set channels.email: {enabled: true} in the config (with account: NAME for the latter)")


def _api(settings: Settings) -> Any:
    return google_api(settings, "Gmail", settings.google.gmail_base_url)


def _headers(msg: dict) -> dict[str, str]:
    return {h["name"].lower(): h["value"] for h in (msg.get("payload") or {}).get("headers", [])}


def _all_headers(msg: dict, name: str) -> list[str]:
    return [h["value"] for h in (msg.get("payload") or {}).get("headers", []) if h["name"].lower() == name]


def sender_verified(msg: dict, trusted_authserv: str = "mx.google.com") -> bool:
    """Whether Gmail's own server vouches for the From: address (integrations/mail_auth.py says how)."""
    return server_vouches(_headers(msg).get("from", ""), _all_headers(msg, "authentication-results"), trusted_authserv)


class EmailChannel:
    name = "email"

    def __init__(self, settings: Settings):
        if not settings.channels.email.enabled:
            raise ChannelError(HOW_TO)
        self.settings = settings
        self.api = _api(settings)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self.api.request(method, path, **kwargs)
        except ToolError as exc:
            raise ChannelError(str(exc)) from None

    def send(self, to: str, text: str, *, thread_key: str | None = None) -> Sent:
        # The address the confirmation showed is the one written and recorded: a To: naming several, or one whose
        # display name looks like another address ("hotel@x.example <eve@evil.example>"), is refused.
        address = mailbox_of(to)
        if address is None:
            raise ChannelError(f"{to!r} is not one email address: give exactly one recipient, as name@example.com")
        mail = EmailMessage()
        mail["To"] = address
        subject = " ".join(text.strip().splitlines()[0].split())[:70] if text.strip() else "(no subject)"
        if thread_key:
            thread = self._call("GET", f"{API}/threads/{thread_key}", params={"format": "metadata"}, what="The thread")
            msgs = thread.get("messages") or []
            if msgs:  # the thread's last message may be anyone's: its headers are made safe (mail_headers.py)
                h = _headers(msgs[-1])
                first = plain_subject(h.get("subject", "")) or subject
                subject = first if first.lower().startswith("re:") else f"Re: {first}"
                replied = message_ids(h.get("message-id"))
                if replied:
                    mail["In-Reply-To"] = replied
                    mail["References"] = f"{message_ids(h.get('references'))} {replied}".strip()
        mail["Subject"] = subject
        mail.set_content(text)
        try:
            data = checked_bytes(mail, [address])
        except UnsafeMessage as exc:
            raise ChannelError(str(exc)) from None
        raw = base64.urlsafe_b64encode(data).decode("ascii")
        message: dict[str, Any] = {"raw": raw}
        if thread_key:
            message["threadId"] = thread_key
        draft = self._call("POST", f"{API}/drafts", json={"message": message}, what="The email draft")
        sent = self._call("POST", f"{API}/drafts/send", json={"id": draft.get("id")}, idempotent=False, what="The email")
        return Sent(channel=self.name, to=address, external_id=sent.get("id"),
                    thread_key=sent.get("threadId") or thread_key)



class EmailPoller:
    """Looks at the Gmail threads open jorbs have written in and delivers each new message from someone else."""

    def __init__(self, settings: Settings, deliver: Callable[[InboundMessage], Any],
                 threads: Callable[[], list[tuple[str, Any]]],
                 converse: Callable[[InboundMessage], bool] | None = None):
        """`converse(message)`: offered each new mail from one of the user's own addresses outside the
        threads above; True when it took it (the user's conversation with Jarvis, conversations/email.py)."""
        if not settings.channels.email.enabled:
            raise ChannelError(HOW_TO)
        self.settings = settings
        self.api = _api(settings)
        self.deliver = deliver
        self.threads = threads
        self.converse = converse
        self.state = ChannelState(settings, "email")
        self._me: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def me(self) -> str:
        if self._me is None:
            self._me = (self.api.request("GET", f"{API}/profile", what="The Gmail profile") or {}).get("emailAddress", "").lower()
        return self._me

    def poll_once(self) -> int:
        """Delivers each new message of the threads jorbs wait on. A thread that cannot be read (deleted, too big,
        malformed) is said in the log and `last_error` and skipped: the others are still read."""
        delivered = 0
        problems = []
        for thread_id, since in self.threads():
            try:
                delivered += self._poll_thread(thread_id, since)
            except Exception as exc:  # noqa: BLE001 - one thread must not keep the others' replies back
                problems.append(f"thread {thread_id}: {exc}")
                log.warning("email thread %s could not be read: %s", thread_id, exc)
        if self.converse is not None:
            try:
                delivered += self._poll_own()
            except Exception as exc:  # noqa: BLE001 - the jorbs' threads were read; this is tried next time
                problems.append(f"your own mail: {exc}")
                log.warning("the user's own mail could not be read: %s", exc)
        self.last_error = "; ".join(problems)[:1000] or None
        return delivered

    def _poll_own(self) -> int:
        """New mail from the user's own addresses (channels.user_identities), written after the conversation by
        email was first polled (older mail in the mailbox starts nothing), offered to `converse`."""
        since_ms = int(self.state.get("own_since", "0") or 0)
        if not since_ms:
            since_ms = int(time.time() * 1000)
            self.state.set("own_since", str(since_ms))
        taken = 0
        for address in sorted({a.strip().lower() for a in self.settings.channels.user_identities if "@" in a
                               and not a.strip().startswith("@")}):
            listed = self.api.request("GET", f"{API}/messages", params={"q": f"from:{address}", "maxResults": 20},
                                      what="Your own mail")
            for ref in listed.get("messages") or []:
                mid = ref.get("id")
                if not mid or self.state.get(f"seen:{mid}") is not None:
                    continue
                msg = self.api.request("GET", f"{API}/messages/{mid}", params={"format": "full"}, what="The message")
                labels = msg.get("labelIds") or []
                if int(msg.get("internalDate") or 0) < since_ms or "SENT" in labels or "DRAFT" in labels:
                    continue
                sender = mailbox_of(_headers(msg).get("from", ""))
                if sender is None:
                    continue
                thread = msg.get("threadId")
                if self.converse(InboundMessage("email", sender, message_body(msg.get("payload") or {}).strip(),
                                                thread_key=str(thread) if thread else None, external_id=mid,
                                                verified=sender_verified(msg))):
                    taken += 1
        return taken

    def _poll_thread(self, thread_id: str, since: Any) -> int:
        delivered = 0
        since_ms = int(since.timestamp() * 1000) if since is not None else 0
        thread = self.api.request("GET", f"{API}/threads/{thread_id}", params={"format": "full"}, what="The thread")
        for msg in thread.get("messages") or []:
            mid = msg.get("id")
            if not mid or not self.state.claim(f"seen:{mid}"):
                continue  # seen before, by this worker or another polling the same mailbox
            if int(msg.get("internalDate") or 0) < since_ms:
                continue  # written before the jorb joined the conversation
            if "SENT" in (msg.get("labelIds") or []) or "DRAFT" in (msg.get("labelIds") or []):
                continue
            raw = _headers(msg).get("from", "")
            sender = mailbox_of(raw)  # the address a mail server reads, never one inside a display name
            if sender is not None and sender == self.me():
                continue  # our own message (the user's own replies come with their address: see user_identities)
            try:
                self.deliver(InboundMessage("email", sender or f"(unreadable From: {raw[:200]})",
                                            message_body(msg.get("payload") or {}).strip(), thread_key=thread_id,
                                            external_id=mid, verified=sender is not None and sender_verified(msg)))
            except Exception as exc:  # noqa: BLE001 - not delivered: the next poll tries it again
                self.state.release(f"seen:{mid}")
                log.warning("email %s in thread %s could not be delivered (tried again next time): %s",
                            mid, thread_id, exc)
                continue
            delivered += 1
        return delivered

    def _run(self) -> None:
        while not self._stop.wait(self.settings.channels.email.poll_interval_s):
            try:
                self.poll_once()
            except Exception as exc:  # noqa: BLE001 - keep polling; say why it failed
                self.last_error = str(exc)
                log.warning("email polling failed: %s", exc)

    def start(self) -> "EmailPoller":
        self._thread = threading.Thread(target=self._run, name="email-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _imap_account(settings: Settings):  # noqa: ANN202 - a MailAccount or None (Gmail)
    """The IMAP account `channels.email.account` names, or None when the channel runs on Gmail."""
    name = settings.channels.email.account
    if not name:
        return None
    from orchestrator.tools.mail_accounts import mail_account

    config = settings.accounts.get(name)
    if config is None or getattr(config, "kind", None) != "imap":
        raise ChannelError(f"channels.email.account is {name!r}, which is not an IMAP account of accounts: (add it "
                           "with `jarvis accounts add`)")
    return mail_account(name, config)


def email_channel(settings: Settings) -> Any:
    """The email channel: on the IMAP account channels.email.account names, else on Gmail."""
    if not settings.channels.email.enabled:
        raise ChannelError(HOW_TO)
    account = _imap_account(settings)
    if account is None:
        return EmailChannel(settings)
    from .email_imap import ImapEmailChannel

    return ImapEmailChannel(settings, account)


def email_poller(settings: Settings, deliver: Callable[[InboundMessage], Any],
                 threads: Callable[[], list[tuple[str, Any]]],
                 converse: Callable[[InboundMessage], bool] | None = None) -> Any:
    """The poller of the account email_channel sends from (EmailPoller's interface)."""
    if not settings.channels.email.enabled:
        raise ChannelError(HOW_TO)
    account = _imap_account(settings)
    if account is None:
        return EmailPoller(settings, deliver, threads, converse=converse)
    from .email_imap import ImapEmailPoller

    return ImapEmailPoller(settings, account, deliver, threads, converse=converse)
