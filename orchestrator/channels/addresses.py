"""Normalized addresses, so "+1 (415) 555-0100", "14155550100" and "+14155550100" are one sender:
phone numbers to E.164 (phonenumbers), emails and @handles lower-cased."""

from __future__ import annotations

import re
from email.errors import HeaderParseError
from email.headerregistry import HeaderRegistry

_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$")
_PHONEISH = re.compile(r"^\+?[\d\s().\-]{7,}$")
_HEADERS = HeaderRegistry()


def mailbox_of(value: str) -> str | None:
    """The one email address an address header (From:, To:) names, lower-cased, as a mail server reads it; None
    when it names none or several, or is malformed. A display name or a comment is never taken for the address:
    `"<me@home.example>" <eve@evil.example>` is eve's, and `me@home.example <eve@evil.example>` is refused (mail
    programs disagree on which address it is)."""
    try:
        header = _HEADERS("to", value or "")
    except (HeaderParseError, IndexError, ValueError):
        return None
    if header.defects or len(header.addresses) != 1:
        return None
    address = header.addresses[0].addr_spec
    return address.lower() if _EMAIL.match(address) else None


def normalize_party(party: str, default_region: str | None = "US") -> str:
    text = (party or "").strip()
    if not text:
        return ""
    if "@" in text and any(c in text for c in '<>(),"'):  # "Alice <Alice@Example.com>": the address, never one in a name or comment
        return mailbox_of(text) or text.lower()
    if _EMAIL.match(text):
        return text.lower()
    if text.startswith("@"):
        return text.lower()
    if _PHONEISH.match(text):
        import phonenumbers

        digits = re.sub(r"[^\d+]", "", text)
        for candidate, region in ((digits, None), (digits, default_region), ("+" + digits.lstrip("+"), None)):
            try:
                number = phonenumbers.parse(candidate, region)
            except phonenumbers.NumberParseException:
                continue
            if phonenumbers.is_possible_number(number):
                return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        return digits
    return text.lower()
