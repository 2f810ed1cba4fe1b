"""The `email` channel on an IMAP/SMTP account (`channels.email.account` names one of `accounts:`), the same
channel the Gmail one is for jorbs, email approvals and the user's own conversation (channels/email.py picks).

A thread is the chain of Message-IDs Jarvis wrote and read in it: its key is a digest of the first one (the root),
and a reply belongs to it when its References or In-Reply-To names one of them (found with one IMAP search in
INBOX). Jarvis's next mail in the thread answers the last message read in it. Sending goes through the account's
SMTP server (checked bytes, the one recipient the confirmation showed), a copy filed in Sent.

Each message is taken once across restarts and workers (a `seen:` claim on its Message-ID, as the Gmail poller
claims Gmail's ids); mail older than the conversation starts nothing. A sender is verified only when the account's
own server vouches for it in the topmost Authentication-Results (its authserv_id), never by what the mail says.
Reading marks nothing read (PEEK) and fetches a bounded part of each message.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from email.message import EmailMessage, Message
from email.utils import formatdate, make_msgid
from typing import Any

from integrations.imap_tools import body_text, read_message, stamped, thread_uids
from integrations.mail_account import MailAccount, connect_imap, connect_smtp
from integrations.mail_auth import server_vouches
from integrations.mail_headers import UnsafeMessage, checked_bytes, message_ids, plain_subject

from orchestrator.core.config import Settings
from .addresses import mailbox_of
from .base import ChannelError, Sent
from .inbound import InboundMessage
from .models import ChannelState

log = logging.getLogger(__name__)

IDLE_CHECK_S = 1.0  # how long one wait for the server's news lasts: a stop is seen within it
IDLE_RENEW_S = 25 * 60  # an IDLE is renewed before the 30 minutes after which servers end it
IDLE_BACKOFF_S, IDLE_BACKOFF_MAX_S = 1.0, 120.0  # the wait before opening a dropped connection again, doubling
MAX_THREAD_IDS = 20  # the root and the latest ones: enough to find replies, bounded in the state row
INBOX = "INBOX"


def thread_key_of(root: str) -> str:
    return hashlib.sha256(root.encode()).hexdigest()[:32]


def _seen_key(account: str, message_id: str) -> str:
    return f"seen:imap:{account}:{hashlib.sha256(message_id.encode()).hexdigest()[:40]}"


class Threads:
    """The Message-IDs and subject of each thread, kept in the channel's state (`imap-thread:<key>`)."""

    def __init__(self, state: ChannelState):
        self.state = state

    def get(self, key: str) -> dict[str, Any] | None:
        raw = self.state.get(f"imap-thread:{key}")
        return json.loads(raw) if raw else None

    def add(self, root: str, message_id: str, subject: str = "") -> str:
        key = thread_key_of(root)
        thread = self.get(key) or {"ids": [root], "subject": subject}
        ids = [i for i in thread["ids"] if i != message_id] + [message_id]
        thread["ids"] = ids[:1] + ids[1:][-(MAX_THREAD_IDS - 1):]
        thread["subject"] = thread.get("subject") or subject
        self.state.set(f"imap-thread:{key}", json.dumps(thread))
        return key


def _when(value: Any) -> float:
    if isinstance(value, datetime.datetime):
        return (value if value.tzinfo else value.astimezone()).timestamp()
    return 0.0


class ImapEmailChannel:
    name = "email"

    def __init__(self, settings: Settings, account: MailAccount):
        self.settings = settings
        self.account = account
        self.threads = Threads(ChannelState(settings, "email"))

    def send(self, to: str, text: str, *, thread_key: str | None = None) -> Sent:
        # The address the confirmation showed is the one written and recorded (channels/email.py says why).
        address = mailbox_of(to)
        if address is None:
            raise ChannelError(f"{to!r} is not one email address: give exactly one recipient, as name@example.com")
        acct = self.account
        mail = EmailMessage()
        mail["From"] = acct.address
        mail["To"] = address
        mail["Date"] = formatdate(localtime=True)
        mail["Message-ID"] = own_id = make_msgid(domain=acct.address.rpartition("@")[2])
        subject = " ".join(text.strip().splitlines()[0].split())[:70] if text.strip() else "(no subject)"
        thread = self.threads.get(thread_key) if thread_key else None
        if thread:  # the ids were read from mail anyone could write: only their <id@host> tokens are copied
            first = plain_subject(thread.get("subject", "")) or subject
            subject = first if first.lower().startswith("re:") else f"Re: {first}"
            ids = message_ids(" ".join(thread["ids"])).split()
            if ids:
                mail["In-Reply-To"] = ids[-1]
                mail["References"] = " ".join(ids)
        mail["Subject"] = subject
        mail.set_content(text)
        try:
            data = checked_bytes(mail, [address])
        except UnsafeMessage as exc:
            raise ChannelError(str(exc)) from None
        try:
            smtp = connect_smtp(acct)
        except Exception as exc:  # noqa: BLE001 - a ToolError or TlsRefused: said as the channel's error
            raise ChannelError(str(exc)) from None
        try:
            smtp.sendmail(acct.address, [address], data)
        except Exception as exc:  # noqa: BLE001 - not sent: the caller's effect is not recorded as done
            raise ChannelError(f"The SMTP server of account {acct.name!r} did not take the mail ({exc}).") from None
        finally:
            try:
                smtp.quit()
            except Exception:  # noqa: BLE001 - sent already; the connection's end does not matter
                pass
        root = thread["ids"][0] if thread else own_id
        key = self.threads.add(root, own_id, subject)
        self._file_in_sent(data)
        return Sent(channel=self.name, to=address, external_id=own_id, thread_key=key)

    def _file_in_sent(self, data: bytes) -> None:
        """A copy in the account's Sent folder, so the thread reads whole in any mail program (the mail is sent
        already: a failure here is said in the log, not raised)."""
        try:
            client = connect_imap(self.account)
            try:
                folder = client.find_special_folder(b"\\Sent")
                if folder:
                    client.append(folder, data, flags=[b"\\Seen"])
            finally:
                client.logout()
        except Exception as exc:  # noqa: BLE001 - see the docstring
            log.info("the mail was sent but no copy was filed in Sent of account %s: %s", self.account.name, exc)


class ImapEmailPoller:
    """Looks in the account's INBOX for replies in the threads open jorbs (or approvals) wait on, and, with
    `converse`, for new mail from the user's own addresses (channels/email.EmailPoller's interface)."""

    def __init__(self, settings: Settings, account: MailAccount, deliver: Callable[[InboundMessage], Any],
                 threads: Callable[[], list[tuple[str, Any]]],
                 converse: Callable[[InboundMessage], bool] | None = None,
                 connect: Callable[[MailAccount], Any] = connect_imap):
        self.settings = settings
        self.account = account
        self.deliver = deliver
        self.threads = threads
        self.converse = converse
        self.connect = connect
        self.state = ChannelState(settings, "email")
        self.known = Threads(self.state)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None
        self.interval = settings.channels.email.poll_interval_s
        self.idles = 0  # how many IDLE sessions began (each connection, after a drop too)

    def me(self) -> str:
        return self.account.address.lower()

    def poll_once(self) -> int:
        """Delivers each new message of the threads waited on, then offers the user's own new mail. A thread that
        cannot be read is said in the log and `last_error` and skipped: the others are still read."""
        delivered = 0
        problems = []
        client = self.connect(self.account)
        try:
            selected = client.select_folder(INBOX, readonly=True)
            for key, since in self.threads():
                try:
                    delivered += self._poll_thread(client, key, since)
                except Exception as exc:  # noqa: BLE001 - one thread must not keep the others' replies back
                    problems.append(f"thread {key}: {exc}")
                    log.warning("email thread %s could not be read: %s", key, exc)
            if self.converse is not None:
                try:
                    delivered += self._poll_own(client, selected)
                except Exception as exc:  # noqa: BLE001 - the jorbs' threads were read; this is tried next time
                    problems.append(f"your own mail: {exc}")
                    log.warning("the user's own mail could not be read: %s", exc)
        finally:
            try:
                client.logout()
            except Exception:  # noqa: BLE001 - the connection may already be gone
                pass
        self.last_error = "; ".join(problems)[:1000] or None
        return delivered

    def _read(self, client: Any, uid: int) -> tuple[Message, str, float]:
        msg, cut = read_message(client, uid)
        when = client.fetch([uid], [b"INTERNALDATE"]).get(uid, {}).get(b"INTERNALDATE")
        return msg, body_text(msg, cut).strip(), _when(when)

    def _poll_thread(self, client: Any, key: str, since: Any) -> int:
        thread = self.known.get(key)
        if not thread:
            return 0  # not a thread of this account (written before the channel moved here)
        since_s = int(_when(since)) if since is not None else 0
        also = ["SINCE", datetime.date.fromtimestamp(since_s - 86400)] if since_s else []
        delivered = 0
        for uid in sorted(thread_uids(client, thread["ids"], also)):
            msg, text, when = self._read(client, uid)
            mid = message_ids(str(msg.get("message-id", ""))).split()[:1]
            seen = _seen_key(self.account.name, mid[0] if mid else f"uid:{uid}")
            if when < since_s:
                continue  # written before the conversation
            if not self.state.claim(seen):
                continue  # seen before, by this worker or another polling the same mailbox
            raw = str(msg.get("from", ""))
            sender = mailbox_of(raw)  # the address a mail server reads, never one inside a display name
            if sender is not None and sender == self.me():
                continue
            if mid:  # before delivering: the jorb may answer at once, and its answer replies to this one
                self.known.add(thread["ids"][0], mid[0])
            try:
                self.deliver(InboundMessage("email", sender or f"(unreadable From: {raw[:200]})", text,
                                            thread_key=key, external_id=seen.removeprefix("seen:"),
                                            verified=sender is not None and self._verified(msg)))
            except Exception as exc:  # noqa: BLE001 - not delivered: the next poll tries it again
                self.state.release(seen)
                log.warning("email %s in thread %s could not be delivered (tried again next time): %s", uid, key, exc)
                continue
            delivered += 1
        return delivered

    def _verified(self, msg: Message) -> bool:
        return server_vouches(str(msg.get("from", "")), stamped(msg), self.account.authserv_id)

    def _poll_own(self, client: Any, selected: dict[bytes, Any]) -> int:
        """New mail from the user's own addresses (channels.user_identities), delivered after the conversation by
        email was first polled (older mail starts nothing), offered to `converse` in its thread.

        "After" is by UID, not by the clock: the first look keeps INBOX's UIDNEXT (and UIDVALIDITY), and only mail
        at or past it counts. A time in whole seconds took a mail delivered in the same second just before the
        first look for a new one. A changed UIDVALIDITY (the mailbox rebuilt) starts again from its UIDNEXT then."""
        validity = str(selected.get(b"UIDVALIDITY", ""))
        if self.state.get("imap_own_uidvalidity") != validity:
            self.state.set("imap_own_uidvalidity", validity)
            self.state.set("imap_own_from_uid", str(int(selected.get(b"UIDNEXT") or 1)))
            self.state.set("imap_own_since", str(int(time.time())))
        from_uid = int(self.state.get("imap_own_from_uid", "1") or 1)
        since_s = int(self.state.get("imap_own_since", "0") or 0)
        taken = 0
        for address in sorted({a.strip().lower() for a in self.settings.channels.user_identities if "@" in a
                               and not a.strip().startswith("@")}):
            found = client.search(["FROM", address, "SINCE", datetime.date.fromtimestamp(since_s - 86400)])
            for uid in sorted(u for u in found if u >= from_uid):
                msg, text, _ = self._read(client, uid)
                mid = message_ids(str(msg.get("message-id", ""))).split()[:1]
                seen = _seen_key(self.account.name, mid[0] if mid else f"uid:{uid}")
                if self.state.get(seen) is not None:
                    continue
                sender = mailbox_of(str(msg.get("from", "")))
                if sender is None or not mid:
                    continue
                chain = message_ids(str(msg.get("references", ""))).split() or \
                    message_ids(str(msg.get("in-reply-to", ""))).split()
                key = self.known.add(chain[0] if chain else mid[0], mid[0], str(msg.get("subject", "")))
                message = InboundMessage("email", sender, text, thread_key=key,
                                         external_id=seen.removeprefix("seen:"), verified=self._verified(msg))
                if self.converse is not None and self.converse(message):
                    taken += 1
        return taken

    def _run(self) -> None:
        """IDLE where the server offers it (a reply is read within seconds of its delivery, and every `interval`
        anyway); polling every `interval` where it does not. A dropped connection is opened again after a wait
        that doubles with each failure in a row (up to IDLE_BACKOFF_MAX_S), polling once on each try."""
        failures = 0
        while not self._stop.is_set():
            try:
                if not self._idle():
                    break  # no IDLE on this server: poll
                failures = 0
            except Exception as exc:  # noqa: BLE001 - said, then tried again after the backoff
                failures += 1
                self.last_error = f"IDLE: {exc}"
                log.warning("email IDLE on account %s failed (%d in a row): %s", self.account.name, failures, exc)
                if self._stop.wait(min(IDLE_BACKOFF_MAX_S, IDLE_BACKOFF_S * 2 ** (failures - 1))):
                    return
        while not self._stop.wait(self.interval):
            try:
                self.poll_once()
            except Exception as exc:  # noqa: BLE001 - keep polling; say why it failed
                self.last_error = str(exc)
                log.warning("email polling failed: %s", exc)

    def _idle(self) -> bool:
        """Watches INBOX on one connection until stopped; False at once when the server offers no IDLE. Each wake
        (new mail, or `interval` passed) reads the threads through poll_once."""
        client = self.connect(self.account)
        try:
            if not client.has_capability("IDLE"):
                return False
            client.select_folder(INBOX, readonly=True)
            listening = False
            while not self._stop.is_set():
                client.idle()
                # What came while nobody watched is read once IDLE listens, not before: a message delivered
                # between a read and the IDLE command is announced ahead of the server's "+", which imaplib keeps
                # to itself, so idle_check never saw it and the reply waited for the next hourly read.
                self.poll_once()
                if not listening:
                    listening = True
                    self.idles += 1
                started = time.monotonic()
                try:
                    # servers end an IDLE after 30 minutes: it is renewed before; the check wakes to see a stop
                    while not self._stop.is_set() and time.monotonic() - started < min(self.interval, IDLE_RENEW_S):
                        asked = time.monotonic()
                        news = client.idle_check(IDLE_CHECK_S)
                        if any(r[1:2] in ((b"EXISTS",), (b"RECENT",)) for r in news):
                            break  # new mail: read on the next IDLE
                        if not news and time.monotonic() - asked < IDLE_CHECK_S / 2:
                            break  # woken with nothing to read: the connection may have ended (idle_done tells)
                finally:
                    client.idle_done()  # raises on a connection that ended: opened again after the backoff
            return True
        finally:
            try:
                client.logout()
            except Exception:  # noqa: BLE001 - the connection may already be gone
                pass

    def start(self, interval: float | None = None) -> "ImapEmailPoller":
        """`interval`: how often the threads are read without IDLE (default channels.email.poll_interval_s)."""
        self.interval = interval or self.settings.channels.email.poll_interval_s
        self._thread = threading.Thread(target=self._run, name="email-poller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
