"""`jarvis accounts add|list|test|remove`: mail accounts over IMAP and SMTP, calendar accounts over CalDAV and
contacts accounts over CardDAV (`--kind caldav|carddav`), in the config's `accounts:`.

`add` takes an address and an app password (read without echo, kept in the keyring, never in the file), fills
the servers from the provider's preset, logs in to both servers before writing anything, and writes the account
into the config file with its comments kept. A self-signed server (Proton Bridge) is pinned with `--pin`: the
certificate's SHA-256 is shown, to compare with the one the server's own app shows, and written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from orchestrator.cli import fail, say, state
from orchestrator.core.config import AccountConfig, DavAccountConfig, MailAccountConfig, Settings

accounts_app = typer.Typer(help="Mail (IMAP and SMTP), calendar (CalDAV) and contacts (CardDAV) accounts (iCloud, "
                           "Fastmail, Outlook.com, Proton Bridge, Nextcloud, a company server...).",
                           no_args_is_help=True)


def _save(settings: Settings, name: str, entry: dict[str, Any] | None) -> Path:
    """Write (or, with None, remove) one account in the config file, its comments and order kept."""
    from ruamel.yaml import YAML

    path = settings.source_path
    if path is None:
        fail("Jarvis runs on built-in defaults with no config file: start it with --config FILE to keep an account")
    yaml = YAML()
    yaml.preserve_quotes = True
    data = (yaml.load(path.read_text(encoding="utf-8")) if path.exists() else None) or {}
    accounts = data.setdefault("accounts", {})
    if entry is None:
        accounts.pop(name, None)
    else:
        accounts[name] = entry
    tmp = path.with_name(f".{path.name}.accounts.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        yaml.dump(data, out)
    if path.exists():
        tmp.chmod(path.stat().st_mode & 0o777)
    tmp.replace(path)
    return path


def _check(name: str, config: AccountConfig) -> str:
    """Log in to the account's servers; what was found there, or a ToolError saying what failed."""
    if isinstance(config, DavAccountConfig):
        return _check_dav(name, config)
    from integrations.mail_account import connect_imap, connect_smtp
    from orchestrator.tools.mail_accounts import mail_account

    account = mail_account(name, config)
    client = connect_imap(account)
    try:
        folders = [f[2] for f in client.list_folders()]
    finally:
        client.logout()
    connect_smtp(account).quit()
    return (f"{name}: IMAP {account.imap_host}:{account.imap_port} ({account.imap_tls}) and SMTP "
            f"{account.smtp_host}:{account.smtp_port} ({account.smtp_tls}) logged in as {account.user}; "
            f"{len(folders)} folders")


def _check_dav(name: str, config: DavAccountConfig) -> str:
    from integrations.carddav_tools import addressbooks
    from integrations.dav_account import dav_client, dav_error
    from orchestrator.tools.dav_accounts import dav_account

    account = dav_account(name, config)
    try:
        with dav_client(account) as client:
            found = ([str(c.name) for c in client.principal().calendars()] if account.kind == "caldav"
                     else addressbooks(client, account.url))
    except Exception as exc:  # noqa: BLE001 - one clear sentence
        raise dav_error(account, exc) from None
    what = "calendars" if account.kind == "caldav" else "address books"
    return f"{name}: {account.kind} {account.url} logged in as {account.user}; {len(found)} {what}"


@accounts_app.command("add")
def add(ctx: typer.Context,
        name: str = typer.Argument(..., help="a short name for the account, e.g. home or work"),
        address: Optional[str] = typer.Option(None, "--address", help="the email address (mail; for a calendar "
                                              "or contacts account, the login name when --user is not given)"),
        kind: str = typer.Option("imap", help="imap (mail), caldav (calendar) or carddav (contacts)"),
        url: Optional[str] = typer.Option(None, help="caldav/carddav: the server's https URL (a preset fills it; "
                                          "nextcloud: your server's address)"),
        calendar: Optional[str] = typer.Option(None, help="caldav: the calendar to use, by name (default: the first)"),
        preset: Optional[str] = typer.Option(None, help="icloud, fastmail, outlook, proton-bridge or nextcloud "
                                             "(default: from the address's domain)"),
        user: Optional[str] = typer.Option(None, help="the login name, if not the address"),
        imap_host: Optional[str] = None, imap_port: Optional[int] = None,
        imap_tls: Optional[str] = typer.Option(None, help="tls or starttls"),
        smtp_host: Optional[str] = None, smtp_port: Optional[int] = None,
        smtp_tls: Optional[str] = typer.Option(None, help="tls or starttls"),
        ca_file: Optional[Path] = typer.Option(None, help="a CA certificate the servers' certificates chain to"),
        pin: bool = typer.Option(False, "--pin", help="pin the IMAP server's certificate (self-signed: Proton "
                                 "Bridge); its fingerprint is shown to compare"),
        authserv_id: Optional[str] = typer.Option(None, help="the name the server writes in "
                                                  "Authentication-Results (makes senders verifiable)"),
        secret: Optional[str] = typer.Option(None, help="the keyring entry for the password (default: mail_NAME)"),
        test: bool = typer.Option(True, "--test/--no-test", help="log in before saving"),
        ) -> None:
    """Add an account: the app password is asked (or read from standard input), kept in the keyring."""
    from integrations.base import ToolError
    from orchestrator.core import secrets

    settings = state(ctx).settings
    if kind not in ("imap", "caldav", "carddav"):
        fail(f"--kind {kind!r}: imap, caldav or carddav")
    login = user or address
    if kind == "imap" and not address:
        fail("a mail account needs --address")
    if kind != "imap" and not login:
        fail(f"a {kind} account needs --user (or --address)")
    if not name.replace("-", "").replace("_", "").isalnum():
        fail(f"account name {name!r}: use letters, digits, - and _ only")
    if name in settings.accounts:
        fail(f"there is already an account named {name!r}: `jarvis accounts remove {name}` first")
    secret = secret or (f"mail_{name}" if kind == "imap" else f"{kind}_{name}")
    if kind != "imap":
        from integrations.mail_presets import preset_for_address

        dav_entry: dict[str, Any] = {k: v for k, v in {
            "kind": kind, "url": url, "preset": preset or preset_for_address(login or ""), "user": login,
            "calendar": calendar, "tls_ca_file": str(ca_file.expanduser().resolve()) if ca_file else None,
        }.items() if v is not None}
        if dav_entry.get("preset") not in (None, "icloud", "fastmail", "nextcloud"):
            dav_entry.pop("preset")
        _add_dav(settings, name, dav_entry, secret, pin, test)
        return
    entry: dict[str, Any] = {k: v for k, v in {
        "address": address, "preset": preset, "user": user, "imap_host": imap_host, "imap_port": imap_port,
        "imap_tls": imap_tls, "smtp_host": smtp_host, "smtp_port": smtp_port, "smtp_tls": smtp_tls,
        "tls_ca_file": str(ca_file.expanduser().resolve()) if ca_file else None, "authserv_id": authserv_id,
    }.items() if v is not None}
    entry["password"] = {"secret": secret}
    config = _validated(name, entry, pinning=pin)
    assert isinstance(config, MailAccountConfig)
    if pin:
        from integrations.mail_account import peer_fingerprint

        assert config.imap_host and config.imap_port
        try:
            found = peer_fingerprint(config.imap_host, config.imap_port, starttls_imap=config.imap_tls == "starttls")
        except Exception as exc:  # noqa: BLE001 - one clear line
            fail(f"could not read the certificate of {config.imap_host}:{config.imap_port}: {exc}")
        say(f"The server's certificate has SHA-256 {found}: check that it is the one your mail app (Proton Bridge: "
            "its settings) shows.")
        entry["tls_fingerprint"] = found
        config = _validated(name, entry)
    password = typer.prompt(f"app password for {address}", hide_input=True) if sys.stdin.isatty() \
        else sys.stdin.read().strip()
    if not password:
        fail("empty password: nothing saved")
    secrets.set_secret(secret, password)
    if test:
        try:
            say(_check(name, config))
        except ToolError as exc:
            fail(f"{exc} The account was not saved.")
    path = _save(settings, name, entry)
    say(f"added account {name} ({address}) to {path}; its password is the keyring entry {secret}")


def _add_dav(settings: Settings, name: str, entry: dict[str, Any], secret: str, pin: bool, test: bool) -> None:
    from urllib.parse import urlsplit

    from integrations.base import ToolError
    from orchestrator.core import secrets

    entry["password"] = {"secret": secret}
    config = _validated(name, entry)
    assert isinstance(config, DavAccountConfig) and config.url
    if pin:
        from integrations.mail_account import peer_fingerprint

        where = urlsplit(config.url)
        try:
            found = peer_fingerprint(where.hostname or "", where.port or 443)
        except Exception as exc:  # noqa: BLE001 - one clear line
            fail(f"could not read the certificate of {config.url}: {exc}")
        say(f"The server's certificate has SHA-256 {found}: check that it is the one the server shows.")
        entry["tls_fingerprint"] = found
        config = _validated(name, entry)
        assert isinstance(config, DavAccountConfig)
    password = typer.prompt(f"app password for {config.user}", hide_input=True) if sys.stdin.isatty() \
        else sys.stdin.read().strip()
    if not password:
        fail("empty password: nothing saved")
    secrets.set_secret(secret, password)
    if test:
        try:
            say(_check(name, config))
        except ToolError as exc:
            fail(f"{exc} The account was not saved.")
    path = _save(settings, name, entry)
    say(f"added {config.kind} account {name} ({config.url}) to {path}; its password is the keyring entry {secret}")


def _validated(name: str, entry: dict[str, Any], pinning: bool = False) -> AccountConfig:
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(AccountConfig).validate_python(
            {**entry, **({"tls_fingerprint": "0" * 64} if pinning else {})})
    except ValidationError as exc:
        fail(f"account {name}: " + "; ".join(e["msg"] for e in exc.errors()))


@accounts_app.command("list")
def list_(ctx: typer.Context) -> None:
    """The accounts, their servers and how their TLS is trusted."""
    settings = state(ctx).settings
    if not settings.accounts:
        say("No accounts: add one with `jarvis accounts add NAME --address you@example.com`.")
    for name, a in settings.accounts.items():
        trust = ("pinned " + (a.tls_fingerprint or "")[:16] + "...") if a.tls_fingerprint else \
            (f"CA {a.tls_ca_file}" if a.tls_ca_file else "system CAs")
        if isinstance(a, DavAccountConfig):
            say(f"{name}: {a.kind} {a.user} ({a.preset or 'custom'}) {a.url}"
                f"{f' calendar {a.calendar!r}' if a.calendar else ''}, TLS trusted by {trust}")
            continue
        say(f"{name}: {a.address} ({a.preset or 'custom'}) IMAP {a.imap_host}:{a.imap_port} {a.imap_tls}, "
            f"SMTP {a.smtp_host}:{a.smtp_port} {a.smtp_tls}, TLS trusted by {trust}")


@accounts_app.command("test")
def test_(ctx: typer.Context, name: str) -> None:
    """Log in to the account's servers (IMAP and SMTP; CalDAV or CardDAV)."""
    from integrations.base import ToolError

    settings = state(ctx).settings
    if name not in settings.accounts:
        fail(f"no account named {name!r}")
    try:
        say(_check(name, settings.accounts[name]))
    except ToolError as exc:
        fail(str(exc))


@accounts_app.command("remove")
def remove(ctx: typer.Context, name: str) -> None:
    """Remove an account from the config (its password stays in the keyring until `jarvis secrets delete`)."""
    settings = state(ctx).settings
    if name not in settings.accounts:
        fail(f"no account named {name!r}")
    password = settings.accounts[name].password
    _save(settings, name, None)
    kept = f"; its password is still the keyring entry {password.secret}" if getattr(password, "secret", None) else ""
    say(f"removed account {name}{kept}")


def register(app: typer.Typer) -> None:
    app.add_typer(accounts_app, name="accounts")
