"""The accounts Jarvis reads and writes through (`accounts:` in the config): mail over IMAP/SMTP, calendars over
CalDAV, contacts over CardDAV, one union chosen by `kind`. Presets fill the servers from an address; TLS is always
verified or pinned, never off."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from .config_base import SecretValue, _Section


class MailAccountConfig(_Section):
    """One mail account over IMAP and SMTP. A preset (icloud, fastmail, outlook, proton-bridge, nextcloud; implied by
    the address's domain when unset) fills the servers left out. TLS is always verified: by the system's CAs, by
    `tls_ca_file`, or by pinning the server's certificate (`tls_fingerprint`, SHA-256); never switched off."""

    kind: Literal["imap"] = "imap"
    address: str = Field(description="the account's email address (the From: of what it sends)")
    preset: Literal["icloud", "fastmail", "outlook", "proton-bridge", "nextcloud"] | None = None
    user: str | None = Field(None, description="the login name; default: the address")
    password: SecretValue = Field(description="an app password, as {secret: NAME} (jarvis secrets set NAME)")
    imap_host: str | None = None
    imap_port: int | None = Field(None, gt=0, lt=65536)
    imap_tls: Literal["tls", "starttls"] | None = None
    smtp_host: str | None = None
    smtp_port: int | None = Field(None, gt=0, lt=65536)
    smtp_tls: Literal["tls", "starttls"] | None = None
    tls_fingerprint: str | None = Field(None, description="SHA-256 of the servers' certificate (hex, colons "
                                        "allowed): a self-signed server such as Proton Bridge, pinned")
    tls_ca_file: Path | None = Field(None, description="a CA certificate file the servers' certificates chain to")
    authserv_id: str | list[str] | None = Field(
        None, description="the name the account's receiving server writes in Authentication-Results: only its "
        "verdicts make a sender verified; a list (`*.domain` for any host under it) for a server that writes one "
        "header per check and always its dkim and dmarc verdicts; the preset's when unset")
    timeout_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _servers(self) -> "MailAccountConfig":
        from integrations.mail_presets import PRESETS, preset_for_address

        if "@" not in self.address:
            raise ValueError(f"address {self.address!r} is not an email address")
        if self.preset is None:
            self.preset = preset_for_address(self.address)  # type: ignore[assignment]
        preset = PRESETS.get(self.preset or "", {})
        for key in ("imap_host", "imap_port", "imap_tls", "smtp_host", "smtp_port", "smtp_tls", "authserv_id"):
            if getattr(self, key) is None and key in preset:
                setattr(self, key, preset[key])
        self.imap_tls = self.imap_tls or "tls"
        self.smtp_tls = self.smtp_tls or "tls"
        self.imap_port = self.imap_port or (993 if self.imap_tls == "tls" else 143)
        self.smtp_port = self.smtp_port or (465 if self.smtp_tls == "tls" else 587)
        if not self.imap_host or not self.smtp_host:
            raise ValueError("give imap_host and smtp_host (or a preset that knows them)")
        if self.password is None:
            raise ValueError("give the password as {secret: NAME}")
        if self.tls_fingerprint is not None:
            self.tls_fingerprint = _sha256_pin(self.tls_fingerprint)
        elif preset.get("needs_fingerprint"):
            raise ValueError(f"the {self.preset} preset serves a self-signed certificate: pin it with "
                             "tls_fingerprint (`jarvis accounts add` shows it)")
        return self


def _sha256_pin(value: str) -> str:
    digits = value.replace(":", "").strip().lower()
    if len(digits) != 64 or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError("tls_fingerprint must be a SHA-256 fingerprint: 64 hex digits")
    return digits


class DavAccountConfig(_Section):
    """A calendar (CalDAV) or contacts (CardDAV) account. A preset (icloud, fastmail; nextcloud with your server's
    URL) fills `url`. TLS is always verified: by the system's CAs, by `tls_ca_file`, or by pinning the server's
    certificate (`tls_fingerprint`, SHA-256); never switched off."""

    kind: Literal["caldav", "carddav"]
    url: str | None = Field(None, description="the server's DAV URL (https); a preset fills it")
    preset: Literal["icloud", "fastmail", "nextcloud"] | None = None
    user: str = Field(description="the login name (iCloud, Fastmail: your address)")
    password: SecretValue = Field(description="an app password, as {secret: NAME} (jarvis secrets set NAME)")
    calendar: str | None = Field(None, description="caldav: the calendar to use, by its name; default: the first")
    tls_fingerprint: str | None = Field(None, description="SHA-256 of the server's certificate (hex, colons "
                                        "allowed): a self-signed server, pinned")
    tls_ca_file: Path | None = Field(None, description="a CA certificate file the server's certificate chains to")
    timeout_s: float = Field(30.0, gt=0)

    @model_validator(mode="after")
    def _server(self) -> "DavAccountConfig":
        from integrations.dav_presets import preset_url

        if self.preset == "nextcloud" and not self.url:
            raise ValueError("the nextcloud preset needs url: your Nextcloud's address, e.g. https://cloud.example.org")
        self.url = preset_url(self.preset, self.kind, self.url)
        if not self.url:
            raise ValueError("give url (or a preset: icloud, fastmail, nextcloud)")
        if not self.url.startswith("https://"):
            raise ValueError(f"url {self.url!r}: only https is allowed (the password and the data go over it)")
        if self.password is None:
            raise ValueError("give the password as {secret: NAME}")
        if self.tls_fingerprint is not None:
            self.tls_fingerprint = _sha256_pin(self.tls_fingerprint)
        return self


def _account_kind(value: Any) -> str:
    """`kind` picks the account's model; a mail account written before there were other kinds has none."""
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "dav" if kind in ("caldav", "carddav") else "imap"


AccountConfig = Annotated[Annotated[MailAccountConfig, Tag("imap")] | Annotated[DavAccountConfig, Tag("dav")],
                          Discriminator(_account_kind)]
