"""Normalized addresses, so "+1 (415) 555-0100", "14155550100" and "+14155550100" are one sender:
phone numbers to E.164 (phonenumbers), emails and @handles lower-cased."""

from __future__ import annotations

import re

from integrations.mail_auth import EMAIL as _EMAIL, mailbox_of  # noqa: F401 - mailbox_of is used from here too

_PHONEISH = re.compile(r"^\+?[\d\s().\-]{7,}$")


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
