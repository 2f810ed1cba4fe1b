"""Whether a mail server vouches for a message's sender (RFC 8601 Authentication-Results), and the one address a
From: header names. Shared by the Gmail channel and the IMAP tools; standard library and authres only.

Anyone can write an Authentication-Results header into the message they send, so only the topmost one counts (the
receiving server adds its own on top) and only when it is stamped by the account's own server (its authserv-id).
Some servers write several headers, one per check (iCloud: dmarc.icloud.com, dkim-verifier.icloud.com...; Fastmail:
four headers from mxN.messagingengine.com): given as a list of ids (`*.domain` for any host under it), the top run of
headers stamped by those ids is read, and each method's verdict is taken from the first header of the run that
carries it. That is safe only for a server that always writes its dkim and dmarc verdicts ("none" when there is
nothing to check), as those two do: a forged header below cannot then add a verdict. A single id (Gmail, which
writes only `spf=` when a mail has no signature) keeps to the topmost header.
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


def _stamped_by(authserv_id: str, trusted: list[str]) -> bool:
    found = authserv_id.strip().lower()
    for t in trusted:
        t = t.strip().lower()
        if found == t or (t.startswith("*.") and found.endswith(t[1:]) and len(found) > len(t) - 1):
            return True
    return False


def _own_results(stamped: list[str], trusted: str | list[str] | tuple[str, ...]) -> list:
    """The results the account's server wrote: the topmost header's (one id), or for a list of ids each method's
    results from the first header of the top run stamped by them."""
    ids = [trusted] if isinstance(trusted, str) else list(trusted)
    found: dict[str, list] = {}
    for value in stamped[:1] if isinstance(trusted, str) else stamped:
        try:
            header = authres.AuthenticationResultsHeader.parse_value(value)
        except authres.AuthResError:
            break
        if not _stamped_by(str(header.authserv_id), ids):
            break
        mine: dict[str, list] = {}
        for result in header.results:
            mine.setdefault(str(result.method).lower(), []).append(result)
        for method, results in mine.items():
            found.setdefault(method, results)  # a method's first header wins: one further down may be forged
    return [r for results in found.values() for r in results]


def server_vouches(from_value: str, stamped: list[str], trusted_authserv: str | list[str] | tuple[str, ...] | None
                   ) -> bool:
    """`stamped`: the message's Authentication-Results values, topmost first; `trusted_authserv`: the id of the
    account's receiving server, or the list of ids of a server that stamps one header per check."""
    sender = mailbox_of(from_value)
    if sender is None or not stamped or not trusted_authserv:
        return False
    domain = sender.rpartition("@")[2]
    for result in _own_results(stamped, trusted_authserv):
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
