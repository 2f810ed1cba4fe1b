"""The servers of the common mail providers, so a user gives an address and an app password and nothing else.

Each preset fills what the account's own settings leave unset: IMAP and SMTP host, port and how TLS starts
("tls": from the first byte; "starttls": upgraded, and refused when the server does not offer it). Proton Bridge
runs on this machine with a self-signed certificate: its account must pin that certificate (tls_fingerprint).
`authserv_id` is the name a provider's receiving server stamps in Authentication-Results; a preset names it only
where it is known, otherwise a sender is verified only when the account configures it.
"""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "icloud": {"imap_host": "imap.mail.me.com", "imap_port": 993, "imap_tls": "tls",
               "smtp_host": "smtp.mail.me.com", "smtp_port": 587, "smtp_tls": "starttls"},
    "fastmail": {"imap_host": "imap.fastmail.com", "imap_port": 993, "imap_tls": "tls",
                 "smtp_host": "smtp.fastmail.com", "smtp_port": 465, "smtp_tls": "tls"},
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
