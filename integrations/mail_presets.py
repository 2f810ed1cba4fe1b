"""The servers of the common mail providers, so a user gives an address and an app password and nothing else.

Each preset fills what the account's own settings leave unset: IMAP and SMTP host, port and how TLS starts
("tls": from the first byte; "starttls": upgraded, and refused when the server does not offer it). Proton Bridge
runs on this machine with a self-signed certificate: its account must pin that certificate (tls_fingerprint).
`authserv_id` is the name a provider's receiving server stamps in Authentication-Results; a preset names it only
where a source shows it (said beside each), otherwise a sender is verified only when the account configures it. A
list is a server that writes one header per check and always its dkim and dmarc verdicts (integrations/mail_auth.py).
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # iCloud stamps one header per check, each with its own id, dkim and dmarc always ("none" when nothing to
    # check): mail received at icloud.com in deltachat/deltachat-core-rust's
    # test-data/message/dkimchecks-2022-09-28/alice@icloud.com/ (e.g. alice@gmail.com, forged-authres-added@...).
    "icloud": {"imap_host": "imap.mail.me.com", "imap_port": 993, "imap_tls": "tls",
               "smtp_host": "smtp.mail.me.com", "smtp_port": 587, "smtp_tls": "starttls",
               "authserv_id": ["bimi.icloud.com", "arc.icloud.com", "dmarc.icloud.com", "dkim-verifier.icloud.com",
                               "spf.icloud.com"]},
    # Fastmail stamps four headers from the receiving host (mx1, mx6... .messagingengine.com), the last with dkim
    # and dmarc, always ("none" when nothing to check): the same test data, alice@fastmail.com/.
    "fastmail": {"imap_host": "imap.fastmail.com", "imap_port": 993, "imap_tls": "tls",
                 "smtp_host": "smtp.fastmail.com", "smtp_port": 465, "smtp_tls": "tls",
                 "authserv_id": ["*.messagingengine.com"]},
    # Outlook.com writes no authserv-id at all ("Authentication-Results: spf=pass ..."; the same test data,
    # alice@outlook.com/, and Microsoft's Q&A "Authentication-results header written by Outlook violates RFC 8601"):
    # nothing can say the header is its own, so an Outlook.com sender stays unverified.
    "outlook": {"imap_host": "outlook.office365.com", "imap_port": 993, "imap_tls": "tls",
                "smtp_host": "smtp-mail.outlook.com", "smtp_port": 587, "smtp_tls": "starttls"},
    "proton-bridge": {"imap_host": "127.0.0.1", "imap_port": 1143, "imap_tls": "starttls",
                      "smtp_host": "127.0.0.1", "smtp_port": 1025, "smtp_tls": "starttls",
                      "needs_fingerprint": True},
    # Nextcloud serves calendars and contacts, not mail: its mail account names the mail servers itself.
    "nextcloud": {},
}

PRESET_FOR_DOMAIN = {"icloud.com": "icloud", "me.com": "icloud", "mac.com": "icloud", "fastmail.com": "fastmail",
                     "fastmail.fm": "fastmail", "outlook.com": "outlook", "hotmail.com": "outlook",
                     "live.com": "outlook", "proton.me": "proton-bridge", "protonmail.com": "proton-bridge"}


def preset_for_address(address: str) -> str | None:
    """The preset an address's domain implies (alice@icloud.com: icloud), or None."""
    return PRESET_FOR_DOMAIN.get(address.rpartition("@")[2].strip().lower())
