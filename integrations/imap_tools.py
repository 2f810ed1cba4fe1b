"""An IMAP/SMTP account as a provider of the neutral mail tools (integrations/mail_tools.py): search, read a thread,
draft a reply (into the account's Drafts folder), send a draft (email_send, asked first with every recipient shown).

A message is named by `account:uidvalidity:uid:folder`. When the server renumbers a folder (UIDVALIDITY changed),
a name from before is refused rather than read, since the same UID may now be another message: search again.
Reading never changes the mailbox (folders opened read-only, bodies fetched with PEEK), and a message's bytes are
read up to a bound (a 50 MB attachment is cut, and said to be), so a connection that drops mid-fetch loses nothing.
A draft is removed only after the server accepted the mail. Everything read is outside content (untrusted).
Threading is by Message-ID / References / In-Reply-To, searched in the folder and in Sent.
"""

from __future__ import annotations

import imaplib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email import message_from_bytes
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.policy import default
from email.utils import formatdate, getaddresses, make_msgid, parsedate_to_datetime
from typing import Any

from langchain_core.tools import BaseTool

from .base import ToolError
from .gmail_tools import MAX_BODY_CHARS, html_to_text, markdown_to_html
from .mail_account import MailAccount, connect_imap, connect_smtp
from .mail_auth import server_vouches
from .mail_headers import RECIPIENT_HEADERS, UnsafeMessage, checked_bytes, message_ids, plain_subject, reply_message
from .mail_tools import MailProvider, build_mail_tools

MAX_MESSAGE_BYTES = 2 * 1024 * 1024  # read of one message; the rest (an attachment, mostly) is not fetched
MAX_DRAFT_BYTES = 25 * 1024 * 1024
MAX_THREAD = 30
_SUMMARY = (b"BODY.PEEK[HEADER.FIELDS (FROM TO CC SUBJECT DATE MESSAGE-ID REFERENCES IN-REPLY-TO REPLY-TO "
            b"AUTHENTICATION-RESULTS)]")


def _ref(account: str, uidvalidity: int, uid: int, folder: str) -> str:
    return f"{account}:{uidvalidity}:{uid}:{folder}"


def _parse_ref(ref: str, what: str) -> tuple[str, int, int, str]:
    parts = (ref or "").strip().split(":", 3)
    if len(parts) != 4 or not parts[1].isdigit() or not parts[2].isdigit():
        raise ToolError(f"{ref!r} is not a {what}: take it from mail_search (it looks like account:123:45:INBOX).")
    return parts[0], int(parts[1]), int(parts[2]), parts[3]


def _headers(msg: Message) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in msg.items():
        found.setdefault(name.lower(), str(value))
    return found


def _parse(data: bytes) -> Message:
    try:
        return BytesParser(policy=default).parsebytes(data)
    except Exception:  # noqa: BLE001 - malformed MIME: read it the old, forgiving way
        return message_from_bytes(data)


def _part_text(part: Message) -> str:
    try:
        payload = part.get_payload(decode=True) or b""
    except (ValueError, AssertionError):  # undecodable transfer encoding: nothing to read
        return ""
    try:
        return payload.decode(part.get_content_charset() or "utf-8", errors="replace")
    except LookupError:  # a charset nobody knows: read as UTF-8, what cannot be read marked
        return payload.decode("utf-8", errors="replace")


def body_text(msg: Message, cut: int = 0) -> str:
    """The text of a message: text/plain preferred, else HTML turned to text; attachments named, a cut said."""
    plain: list[str] = []
    html: list[str] = []
    attachments: list[str] = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        try:
            name = part.get_filename()
        except Exception:  # noqa: BLE001 - a malformed parameter
            name = "(unnamed)"
        if name or part.get_content_disposition() == "attachment":
            attachments.append(plain_subject(str(name or "(unnamed)")))
        elif part.get_content_type() == "text/plain":
            plain.append(_part_text(part))
        elif part.get_content_type() == "text/html":
            html.append(_part_text(part))
    text = "\n".join(plain).strip() or html_to_text("\n".join(html))
    if len(text) > MAX_BODY_CHARS:
        text = text[:MAX_BODY_CHARS] + f"\n[... {len(text) - MAX_BODY_CHARS} more characters]"
    if attachments:
        text += "\n[attachments: " + ", ".join(attachments) + "]"
    if cut:
        text += f"\n[the message is {cut} bytes; only its first {MAX_MESSAGE_BYTES} were read]"
    return text


def read_message(client: Any, uid: int) -> tuple[Message, int]:
    """A message of the selected folder, read up to MAX_MESSAGE_BYTES without marking it read: (message, its whole
    size when it was cut, else 0)."""
    key = f"BODY.PEEK[]<0.{MAX_MESSAGE_BYTES}>".encode()
    data = client.fetch([uid], [key, b"RFC822.SIZE"]).get(uid)
    if data is None:
        raise ToolError("That message is no longer in the folder (deleted or moved): search again.")
    raw = next((v for k, v in data.items() if k.startswith(b"BODY[]")), b"") or b""
    size = int(data.get(b"RFC822.SIZE") or len(raw))
    return _parse(raw), size if size > len(raw) else 0


def thread_uids(client: Any, ids: list[str], also: list[Any] | None = None) -> set[int]:
    """One search (one pass over the selected folder) for every message naming one of the ids, in any threading
    header: a search per id and header read a 10,000-message folder 30 times. `also`: more criteria (SINCE ...)."""
    keys: list[Any] = [["HEADER", header, mid] for mid in ids[-10:]
                       for header in ("Message-ID", "References", "In-Reply-To")]
    while len(keys) > 1:
        keys = [["OR", *keys[i:i + 2]] if i + 1 < len(keys) else keys[i] for i in range(0, len(keys), 2)]
    return set(client.search([*(also or []), keys[0]])) if keys else set()


def stamped(msg: Message) -> list[str]:
    """The message's Authentication-Results values, topmost first (integrations/mail_auth.server_vouches)."""
    return [str(v) for v in msg.get_all("authentication-results") or []]


def build_imap_tools(accounts: dict[str, MailAccount],
                     connect: Callable[[MailAccount], Any] = connect_imap) -> list[BaseTool]:
    """The neutral mail tools (integrations/mail_tools.py) over these IMAP accounts only."""
    return build_mail_tools({name: imap_provider(account, connect) for name, account in accounts.items()})


def imap_provider(account: MailAccount, connect: Callable[[MailAccount], Any] = connect_imap) -> MailProvider:
    """One IMAP/SMTP account as a provider of the neutral mail tools; its ids are `name:uidvalidity:uid:folder`."""
    accounts = {account.name: account}

    def account_of(name: str | None) -> MailAccount:
        if not accounts:
            raise ToolError("No mail account is set up: run `jarvis accounts add`.")
        if not name:
            return next(iter(accounts.values()))
        if name not in accounts:
            raise ToolError(f"No mail account named {name!r}; the accounts are: {', '.join(accounts)}.")
        return accounts[name]

    @contextmanager
    def session(account: MailAccount) -> Iterator[Any]:
        client = connect(account)
        try:
            yield client
        except (imaplib.IMAP4.abort, OSError) as exc:  # TLS errors and timeouts are OSErrors
            raise ToolError(f"The connection to {account.imap_host} dropped ({exc or type(exc).__name__}); nothing in "
                            "the mailbox was changed. Try again.") from None
        except imaplib.IMAP4.error as exc:
            raise ToolError(f"The IMAP server of account {account.name!r} refused: {exc}") from None
        finally:
            try:
                client.logout()
            except Exception:  # noqa: BLE001 - the connection may already be gone
                pass

    def open_folder(client: Any, account: MailAccount, folder: str, uidvalidity: int | None = None,
                    readonly: bool = True) -> int:
        try:
            info = client.select_folder(folder, readonly=readonly)
        except imaplib.IMAP4.error as exc:
            if isinstance(exc, imaplib.IMAP4.abort):
                raise
            raise ToolError(f"Account {account.name!r} has no folder {folder!r} ({exc}).") from None
        current = int(info.get(b"UIDVALIDITY", 0))
        if uidvalidity is not None and current != uidvalidity:
            raise ToolError(f"The server renumbered folder {folder!r} of account {account.name!r} since this id was "
                            "given (UIDVALIDITY changed), so it could name another message now: nothing was read. "
                            "Search again for the message.")
        return current

    def summary(account: MailAccount, folder: str, uidvalidity: int, uid: int, data: dict) -> dict[str, Any]:
        raw = next((v for k, v in data.items() if k.startswith(b"BODY[HEADER")), b"") or b""
        msg = _parse(raw)
        h = _headers(msg)
        return {"id": _ref(account.name, uidvalidity, uid, folder), "from": h.get("from", ""),
                "to": h.get("to", ""), "subject": plain_subject(h.get("subject", "")), "date": h.get("date", ""),
                "unread": b"\\Seen" not in (data.get(b"FLAGS") or ()), "size": data.get(b"RFC822.SIZE"),
                "sender_verified": server_vouches(h.get("from", ""), stamped(msg), account.authserv_id)}

    def mail_search(query: str = "", account: str | None = None, folder: str = "INBOX",
                    from_address: str | None = None, unread_only: bool = False, max_results: int = 20,
                    offset: int = 0) -> dict:
        """Search an email account's folder (newest first, a page at a time). Returns messages with id, from, to,
        subject, date, unread and sender_verified, and next_offset when there are more; read one with
        mail_read_thread(id)."""
        acct = account_of(account)
        criteria: list[Any] = []
        if query.strip():
            criteria += ["TEXT", query.strip()]
        if from_address:
            criteria += ["FROM", from_address]
        if unread_only:
            criteria.append("UNSEEN")
        with session(acct) as client:
            uidvalidity = open_folder(client, acct, folder)
            charset = None if all(isinstance(c, str) and c.isascii() for c in criteria) else "UTF-8"
            uids = sorted(client.search(criteria or ["ALL"], charset=charset), reverse=True)
            page = uids[offset:offset + max_results]
            fetched = client.fetch(page, [_SUMMARY, b"FLAGS", b"RFC822.SIZE"]) if page else {}
            found = [summary(acct, folder, uidvalidity, uid, fetched[uid]) for uid in page if uid in fetched]
        more = offset + len(page) < len(uids)
        return {"account": acct.name, "folder": folder, "total": len(uids), "messages": found,
                "next_offset": offset + len(page) if more else None}

    def mail_read_thread(message_id: str) -> dict:
        """Read a message and the others of its thread (by Message-ID / References, in its folder and in Sent):
        each one's sender, recipients, date, subject, text body and whether the server verified the sender."""
        name, uidvalidity, uid, folder = _parse_ref(message_id, "message id")
        acct = account_of(name)
        with session(acct) as client:
            open_folder(client, acct, folder, uidvalidity)
            first, _ = read_message(client, uid)
            h = _headers(first)
            ids = message_ids(h.get("references")).split() + message_ids(h.get("message-id")).split()
            places = [(folder, uidvalidity, thread_uids(client, ids) | {uid} if ids else {uid})]
            sent = client.find_special_folder(b"\\Sent")
            if sent and sent != folder and ids:
                sent_validity = open_folder(client, acct, sent)
                places.append((sent, sent_validity, thread_uids(client, ids)))
            messages = []
            for where, validity, uids in places:
                if where != folder or len(places) > 1:
                    open_folder(client, acct, where, validity)
                for one in sorted(uids)[:MAX_THREAD]:
                    msg, cut = read_message(client, one)
                    mh = _headers(msg)
                    messages.append({"id": _ref(acct.name, validity, one, where), "from": mh.get("from", ""),
                                     "to": mh.get("to", ""), "cc": mh.get("cc", ""), "date": mh.get("date", ""),
                                     "subject": plain_subject(mh.get("subject", "")), "body": body_text(msg, cut),
                                     "sender_verified": server_vouches(mh.get("from", ""), stamped(msg),
                                                                     acct.authserv_id)})
        messages.sort(key=lambda m: _when(m["date"]))
        return {"account": acct.name, "subject": plain_subject(h.get("subject", "")), "messages": messages}

    def drafts_folder(client: Any) -> str:
        return client.find_special_folder(b"\\Drafts") or "Drafts"

    def mail_draft_reply(message_id: str, body_md: str) -> dict:
        """Save a draft reply to a message in its account's Drafts folder (To, subject and threading headers set
        from it). Nothing is sent: send it afterwards with mail_send_draft(draft_id)."""
        if not body_md.strip():
            raise ToolError("The reply is empty: pass its text in body_md.")
        name, uidvalidity, uid, folder = _parse_ref(message_id, "message id")
        acct = account_of(name)
        with session(acct) as client:
            open_folder(client, acct, folder, uidvalidity)
            original, _ = read_message(client, uid)
            try:
                mail, to = reply_message(_headers(original), acct.address, body_md, markdown_to_html(body_md))
            except UnsafeMessage:
                raise ToolError("That message has no sender to reply to.") from None
            mail["Date"] = formatdate(localtime=True)  # smtplib adds none, and a thread is read in date order
            mail["Message-ID"] = make_msgid(domain=acct.address.rpartition("@")[2])
            try:
                data = checked_bytes(mail, [a for _, a in getaddresses([to]) if a])
            except UnsafeMessage as exc:
                raise ToolError(str(exc)) from None
            drafts = drafts_folder(client)
            client.append(drafts, data, flags=[b"\\Draft", b"\\Seen"])
            validity = open_folder(client, acct, drafts)
            saved = client.search(["HEADER", "Message-ID", str(mail["Message-ID"])])
        if not saved:
            raise ToolError(f"The draft was written to {drafts!r} but could not be found there again.")
        return {"draft_id": _ref(acct.name, validity, max(saved), drafts), "to": to, "subject": str(mail["Subject"]),
                "status": "draft saved, not sent"}

    def read_draft(client: Any, acct: MailAccount, draft_id: str) -> tuple[EmailMessage, int]:
        _, uidvalidity, uid, folder = _parse_ref(draft_id, "draft id")
        open_folder(client, acct, folder, uidvalidity, readonly=False)
        data = client.fetch([uid], [f"BODY.PEEK[]<0.{MAX_DRAFT_BYTES}>".encode()]).get(uid)
        if not data:
            raise ToolError(f"Draft {draft_id} is not in the Drafts folder any more (sent or deleted?).")
        raw = next((v for k, v in data.items() if k.startswith(b"BODY[]")), b"") or b""
        return BytesParser(policy=default).parsebytes(raw), uid  # type: ignore[return-value]

    def mail_send_draft(draft_id: str) -> dict:
        """Send a draft made with mail_draft_reply. This sends the email; the user is asked first."""
        name = _parse_ref(draft_id, "draft id")[0]
        acct = account_of(name)
        with session(acct) as client:
            mail, uid = read_draft(client, acct, draft_id)
            to = [a for _, a in getaddresses([str(v) for h in RECIPIENT_HEADERS for v in mail.get_all(h) or []]) if a]
            if not to:
                raise ToolError(f"Draft {draft_id} has no recipient.")
            try:
                data = checked_bytes(mail, to)
            except UnsafeMessage as exc:
                raise ToolError(str(exc)) from None
            smtp = connect_smtp(acct)
            try:
                refused = smtp.send_message(BytesParser(policy=default).parsebytes(data), from_addr=acct.address,
                                            to_addrs=to)
            except Exception as exc:  # noqa: BLE001 - the draft stays: nothing is lost
                raise ToolError(f"The SMTP server did not take the mail ({exc}); the draft is kept.") from None
            finally:
                try:
                    smtp.quit()
                except Exception:  # noqa: BLE001
                    pass
            done = {"sent": True, "to": to, "refused": sorted(refused), "message_id": str(mail.get("Message-ID", ""))}
            try:  # the mail is gone: a failure now must not read as "not sent" (sending again would send twice)
                file_sent(client, mail, uid, _parse_ref(draft_id, "draft id")[3])
            except (imaplib.IMAP4.error, OSError) as exc:
                done["note"] = f"sent, but the draft could not be moved out of Drafts ({exc}): do not send it again"
        return done

    def file_sent(client: Any, mail: EmailMessage, uid: int, drafts: str) -> None:
        """A copy in Sent (without its Bcc), then the draft deleted."""
        sent_folder = client.find_special_folder(b"\\Sent")
        if sent_folder:
            del mail["Bcc"]
            client.append(sent_folder, mail.as_bytes(), flags=[b"\\Seen"])
        client.select_folder(drafts)
        client.delete_messages([uid])
        client.uid_expunge([uid]) if client.has_capability("UIDPLUS") else client.expunge()

    def describe_send(args: dict) -> str:
        """Every recipient first (To, Cc and Bcc all receive it), then the subject and how it begins, quoted."""
        draft_id = str(args.get("draft_id", ""))
        try:
            acct = account_of(_parse_ref(draft_id, "draft id")[0])
            with session(acct) as client:
                mail, _ = read_draft(client, acct, draft_id)
        except Exception as exc:  # noqa: BLE001 - said in the question: approving then sends it unseen
            return (f"Send the email draft {draft_id}, whose recipients and text could not be read ({exc}): approve "
                    "only if you know what this draft says and to whom.")
        parts = [f"{label} {', '.join(a for _, a in getaddresses([str(v) for v in mail.get_all(label) or []]))}"
                 for label in ("to", "cc", "bcc") if mail.get_all(label)]
        begins = " ".join(body_text(mail).split())
        subject = plain_subject(str(mail.get("subject", "")))
        return (f"Send the email {'; '.join(parts) or 'to no recipient'} from {acct.address}: subject "
                f"{subject[:80]!r}" + (f", beginning {begins[:120]!r}" if begins else "") + ".")

    return MailProvider(search=mail_search, read_thread=mail_read_thread, draft_reply=mail_draft_reply,
                        send_draft=mail_send_draft, describe_send=describe_send)


def _when(date: str) -> float:
    try:
        return parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError, IndexError):
        return 0.0
