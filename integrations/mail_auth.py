"""Whether a mail server vouches for a message's sender (RFC 8601 Authentication-Results), and the one address a
From: header names. Shared by the Gmail channel and the IMAP tools; standard library and authres only.

Anyone can write an Authentication-Results header into the message they send, so only the topmost one counts (the
receiving server adds its own on top) and only when it is stamped by the account's own server (its authserv-id).
DMARC passing for the From: domain, or DKIM passing for it, vouches; SPF alone does not (it checks the envelope
sender, not From:). The header is parsed, so text the sender controls inside it (a comment, an address such as
`dmarc=pass@evil.example`) is never read as a result.
"""

from __future__ import annotations

import re
from email.errors import HeaderParseError
from email.headerregistry import HeaderRegistry

import authres

EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$")
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
    return address.lower() if EMAIL.match(address) else None


def server_vouches(from_value: str, stamped: list[str], trusted_authserv: str | None) -> bool:
    """`stamped`: the message's Authentication-Results values, topmost first."""
    sender = mailbox_of(from_value)
    if sender is None or not stamped or not trusted_authserv:
        return False
    domain = sender.rpartition("@")[2]
    try:
        header = authres.AuthenticationResultsHeader.parse_value(stamped[0])
    except authres.AuthResError:
        return False
    if str(header.authserv_id).strip().lower() != trusted_authserv.strip().lower():
        return False
    for result in header.results:
        if str(result.result).lower() != "pass":
            continue
        said = {(str(p.type).lower(), str(p.name).lower()): str(p.value or "").lower() for p in result.properties}
        method = str(result.method).lower()
        if method == "dmarc" and said.get(("header", "from")) == domain:
            return True
        signer = said.get(("header", "d")) or said.get(("header", "i"), "").rpartition("@")[2]
        if method == "dkim" and signer and (signer == domain or domain.endswith("." + signer)):
            return True
    return False
