"""Connections to one mail account's IMAP and SMTP servers, with TLS that is never weakened.

Certificates are verified by default (the system's CAs, or a CA file the account names). A server with a
self-signed certificate (Proton Bridge) is pinned instead: the handshake accepts any chain, and the connection is
dropped before a password is sent unless the certificate's SHA-256 is the one configured. STARTTLS is never
skipped: a server that does not offer it (or a man in the middle who strips it from the capabilities) is refused,
and no password goes over plain text. There is no setting that turns verification off.

imapclient and the standard library's smtplib speak the protocols; this module only sets them up.
"""

from __future__ import annotations

import hashlib
import smtplib
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .base import ToolError


@dataclass(frozen=True)
class MailAccount:
    name: str
    address: str
    user: str
    password: Callable[[], str]  # read from the keyring when a connection is made, not when the config loads
    imap_host: str
    imap_port: int
    imap_tls: str  # "tls" | "starttls"
    smtp_host: str
    smtp_port: int
    smtp_tls: str
    tls_fingerprint: str | None = None
    tls_ca_file: Path | None = None
    authserv_id: str | tuple[str, ...] | None = None  # a tuple: a server stamping one header per check
    timeout_s: float = 30.0


class TlsRefused(ToolError):
    """The server's TLS could not be trusted (or was not offered): nothing was sent to it."""


def tls_context(account: MailAccount) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(account.tls_ca_file) if account.tls_ca_file else None)
    if account.tls_fingerprint:  # pinned: the fingerprint, checked right after the handshake, is the trust
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def check_pin(account: MailAccount, sock: ssl.SSLSocket, server: str) -> None:
    """With a pinned certificate, refuse any other before a byte of the login is written."""
    if not account.tls_fingerprint:
        return
    der = sock.getpeercert(binary_form=True) or b""
    found = hashlib.sha256(der).hexdigest()
    if found != account.tls_fingerprint:
        raise TlsRefused(f"{server}: the server's certificate (SHA-256 {found}) is not the one pinned for account "
                         f"{account.name!r} ({account.tls_fingerprint}); nothing was sent. If the server's "
                         "certificate really changed, pin the new one.")


def peer_fingerprint(host: str, port: int, starttls_imap: bool = False, timeout: float = 15.0) -> str:
    """The SHA-256 of a server's certificate, read without trusting it: what `jarvis accounts add` shows the user
    to pin (Proton Bridge)."""
    import imapclient

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if starttls_imap:
        client = imapclient.IMAPClient(host, port=port, ssl=False, timeout=timeout)
        client.starttls(context)
        der = client._imap.sock.getpeercert(binary_form=True)  # noqa: SLF001 - imapclient keeps the socket there
        client.shutdown()
    else:
        with socket.create_connection((host, port), timeout) as raw, context.wrap_socket(raw) as sock:
            der = sock.getpeercert(binary_form=True)
    return hashlib.sha256(der or b"").hexdigest()


def _tls_error(account: MailAccount, server: str, exc: Exception) -> TlsRefused:
    return TlsRefused(f"{server}: TLS failed for account {account.name!r} ({exc}); nothing was sent. A server "
                      "with a self-signed certificate is pinned with tls_fingerprint, or trusted with tls_ca_file.")


def connect_imap(account: MailAccount):  # noqa: ANN201 - an imapclient.IMAPClient, imported lazily
    """A logged-in IMAPClient over verified (or pinned) TLS."""
    import imapclient

    server = f"IMAP {account.imap_host}:{account.imap_port}"
    context = tls_context(account)
    try:
        if account.imap_tls == "tls":
            client = imapclient.IMAPClient(account.imap_host, port=account.imap_port, ssl=True, ssl_context=context,
                                           timeout=account.timeout_s)
        else:
            client = imapclient.IMAPClient(account.imap_host, port=account.imap_port, ssl=False,
                                           timeout=account.timeout_s)
            if b"STARTTLS" not in client.capabilities():
                client.shutdown()
                raise TlsRefused(f"{server} does not offer STARTTLS: refused, the password was not sent in plain "
                                 "text (someone between may have removed it; or use imap_tls: tls)")
            client.starttls(context)
    except TlsRefused:
        raise
    except ssl.SSLError as exc:
        raise _tls_error(account, server, exc) from None
    except (OSError, imapclient.exceptions.IMAPClientError) as exc:
        raise ToolError(f"{server}: could not connect for account {account.name!r} ({exc}).") from None
    try:
        check_pin(account, client._imap.sock, server)  # noqa: SLF001 - the TLS socket imapclient holds
        client.login(account.user, account.password())
    except TlsRefused:
        client.shutdown()
        raise
    except imapclient.exceptions.LoginError as exc:
        client.shutdown()
        raise ToolError(f"{server}: the login of account {account.name!r} was refused ({exc}): check the user "
                        "name and the app password (jarvis secrets set).") from None
    return client


def connect_smtp(account: MailAccount) -> smtplib.SMTP:
    """A logged-in SMTP connection over verified (or pinned) TLS."""
    server = f"SMTP {account.smtp_host}:{account.smtp_port}"
    context = tls_context(account)
    smtp: smtplib.SMTP | None = None
    try:
        if account.smtp_tls == "tls":
            smtp = smtplib.SMTP_SSL(account.smtp_host, account.smtp_port, timeout=account.timeout_s, context=context)
        else:
            smtp = smtplib.SMTP(account.smtp_host, account.smtp_port, timeout=account.timeout_s)
            smtp.ehlo()
            if not smtp.has_extn("starttls"):
                raise TlsRefused(f"{server} does not offer STARTTLS: refused, the password was not sent in plain "
                                 "text (someone between may have removed it; or use smtp_tls: tls)")
            smtp.starttls(context=context)
            smtp.ehlo()
        check_pin(account, smtp.sock, server)  # type: ignore[arg-type]
        smtp.login(account.user, account.password())
        return smtp
    except TlsRefused:
        _close(smtp)
        raise
    except ssl.SSLError as exc:
        _close(smtp)
        raise _tls_error(account, server, exc) from None
    except smtplib.SMTPAuthenticationError as exc:
        _close(smtp)
        raise ToolError(f"{server}: the login of account {account.name!r} was refused ({exc.smtp_code}): check the "
                        "user name and the app password.") from None
    except (OSError, smtplib.SMTPException) as exc:
        _close(smtp)
        raise ToolError(f"{server}: could not connect for account {account.name!r} ({exc}).") from None


def _close(smtp: smtplib.SMTP | None) -> None:
    if smtp is not None:
        try:
            smtp.close()
        except OSError:
            pass
