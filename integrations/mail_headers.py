"""The headers of a reply, taken from a message someone else wrote, made safe to write again; and a last check of
what is sent.

A reply copies the Subject and the Message-ID / References of the message it answers, and the sender wrote those.
Python before 3.11.10 (CVE-2024-6923, gh-121650) writes an encoded word holding a line break back out as a raw
line break: `Subject: =?utf-8?q?Booking=0ABcc:_eve@evil.example?=` copied into a reply became a `Bcc:` header of
Jarvis's message, a copy the confirmation never showed. So the subject is written as plain text (encoded words
decoded, every line break a space), the threading headers keep only their `<id@host>` tokens, and the bytes about
to be sent are parsed back and refused unless they hold exactly the headers written, to exactly the recipients
shown. Standard library only (integrations/ imports nothing from orchestrator/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from email.errors import HeaderParseError, MessageError
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from email.utils import getaddresses, parseaddr

_MESSAGE_ID = re.compile(r"<[^<>\s\"]+@[^<>\s\"]+>")
RECIPIENT_HEADERS = ("to", "cc", "bcc", "resent-to", "resent-cc", "resent-bcc")


class UnsafeMessage(ValueError):
    """The message to be sent is not the one built: a header came out of a value someone else wrote."""


def plain_subject(value: str) -> str:
    """A subject as one line of text: encoded words decoded, every line break and run of blanks one space."""
    try:
        text = str(make_header(decode_header(value or "")))
    except (HeaderParseError, UnicodeError, LookupError, ValueError):
        text = value or ""
    return " ".join(text.split())


def message_ids(value: str | None) -> str:
    """Only the `<id@host>` tokens of a Message-ID, In-Reply-To or References value, space-separated."""
    return " ".join(_MESSAGE_ID.findall(value or ""))


def recipients(message: EmailMessage) -> set[str]:
    return {address.lower() for name in RECIPIENT_HEADERS for _, address in getaddresses(message.get_all(name) or [])
            if address}


def checked_bytes(mail: EmailMessage, to: Iterable[str]) -> bytes:
    """The message's bytes, once parsed back they hold the headers written and no others, and go to `to` only."""
    try:
        data = mail.as_bytes()
    except MessageError as exc:  # a Python with the fix refuses such a header itself (HeaderWriteError)
        raise UnsafeMessage(f"a header of the message would write a line break ({exc}). Nothing was sent.") from None
    back = BytesParser(policy=default).parsebytes(data, headersonly=True)
    written = sorted(name.lower() for name in mail.keys())
    found = sorted(name.lower() for name in back.keys())
    wanted = {address.lower() for address in to}
    if found != written or recipients(back) != wanted:  # type: ignore[arg-type]
        extra = sorted(set(found) - set(written)) or sorted(recipients(back) ^ wanted)  # type: ignore[arg-type]
        raise UnsafeMessage(f"the message came out with other headers or recipients than it was built with "
                            f"({', '.join(extra) or 'a header written twice'}): a header copied from the message it "
                            "answers holds a line break. Nothing was sent.")
    return data


def reply_message(h: dict[str, str], me: str, text: str, html: str | None = None) -> tuple[EmailMessage, str]:
    """A reply to the message whose headers (lower-cased names) are `h`: to its Reply-To or From (to the same people
    again after my own message), its subject and threading headers made safe. Returns the message and its To."""
    sender = parseaddr(h.get("from", ""))[1].lower()
    to = h.get("to", "") if sender and sender == me.lower() else (h.get("reply-to") or h.get("from", ""))
    if not to:
        raise UnsafeMessage("the message has no sender to reply to")
    subject = plain_subject(h.get("subject", ""))  # the sender wrote it, and the threading headers
    if not re.match(r"^\s*re:", subject, re.I):
        subject = f"Re: {subject}".strip()
    mail = EmailMessage()
    mail["To"] = to
    if me:
        mail["From"] = me
    mail["Subject"] = subject
    replied = message_ids(h.get("message-id"))
    if replied:
        mail["In-Reply-To"] = replied
        mail["References"] = f"{message_ids(h.get('references'))} {replied}".strip()
    mail.set_content(text)
    if html is not None:
        mail.add_alternative(html, subtype="html")
    return mail, to
