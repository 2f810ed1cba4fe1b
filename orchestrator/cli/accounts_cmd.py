"""`jarvis accounts add|list|test|remove`: mail accounts over IMAP and SMTP, calendar accounts over CalDAV and
contacts accounts over CardDAV (`--kind caldav|carddav`), in the config's `accounts:`; and the Google sign-in
(kind `google`: Gmail and Google Calendar), listed and tested as the account `google`, but connected with
`jarvis auth google`, not `add`.

`add` takes an address and an app password (read without echo, kept in the keyring, never in a file), fills
the servers from the provider's preset, logs in to both servers before keeping anything, and writes the account
into the user's own file beside the config (config.local.yml, git-ignored), as Settings does: the rules are
tools/account_admin.py's, shared with the Settings view. A self-signed server (Proton Bridge) is pinned with `--pin`: the
certificate's SHA-256 is shown, to compare with the one the server's own app shows, and written.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

from orchestrator.cli import fail, say, state
from orchestrator.core.account_config import AccountConfig, DavAccountConfig
from orchestrator.core.config import Settings
from orchestrator.core.local_settings import NoConfigFile

accounts_app = typer.Typer(help="Mail (IMAP and SMTP), calendar (CalDAV) and contacts (CardDAV) accounts (iCloud, "
                           "Fastmail, Outlook.com, Proton Bridge, Nextcloud, a company server...), and Google (Gmail "
                           "and Google Calendar, connected with `jarvis auth google`).",
                           no_args_is_help=True)


def _password(who: str) -> str:
    return typer.prompt(f"app password for {who}", hide_input=True) if sys.stdin.isatty() else sys.stdin.read().strip()


def _add(settings: Settings, name: str, entry: dict[str, Any], who: str, test: bool) -> str:
    """Add through tools/account_admin.py; exits with its error (nothing saved)."""
    from integrations.base import ToolError
    from orchestrator.tools import account_admin

    try:
        path, found = account_admin.add(settings, name, entry, _password(who), test=test)
    except account_admin.AccountError as exc:
        fail(str(exc))
    except ToolError as exc:
        fail(f"{exc} The account was not saved.")
    except NoConfigFile as exc:
        fail(str(exc))
    if found:
        say(found)
    return str(path)


@accounts_app.command("add")
def add(ctx: typer.Context,
        name: Optional[str] = typer.Argument(None, help="a short name for the account, e.g. home or work"),
        address: Optional[str] = typer.Option(None, "--address", help="the email address (mail; for a calendar "
                                              "or contacts account, the login name when --user is not given)"),
        kind: str = typer.Option("imap", help="imap (mail), caldav (calendar) or carddav (contacts); google is "
                                 "connected with `jarvis auth google` instead"),
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
    from orchestrator.tools.account_admin import GOOGLE_ADD

    if kind == "google":
        fail(GOOGLE_ADD)
    if not name:
        fail("give the account a name: `jarvis accounts add NAME ...`, e.g. home or work")
    settings = state(ctx).settings
    if kind not in ("imap", "caldav", "carddav"):
        fail(f"--kind {kind!r}: imap, caldav or carddav (google: `jarvis auth google`)")
    login = user or address
    if kind == "imap" and not address:
        fail("a mail account needs --address")
    if kind != "imap" and not login:
        fail(f"a {kind} account needs --user (or --address)")
    if name in settings.accounts:
        fail(f"there is already an account named {name!r}: `jarvis accounts remove {name}` first")
    ca = str(ca_file.expanduser().resolve()) if ca_file else None
    if kind != "imap":
        from integrations.mail_presets import preset_for_address

        entry: dict[str, Any] = {k: v for k, v in {
            "kind": kind, "url": url, "preset": preset or preset_for_address(login or ""), "user": login,
            "calendar": calendar, "tls_ca_file": ca,
        }.items() if v is not None}
        if entry.get("preset") not in (None, "icloud", "fastmail", "nextcloud"):
            entry.pop("preset")
    else:
        entry = {k: v for k, v in {
            "address": address, "preset": preset, "user": user, "imap_host": imap_host, "imap_port": imap_port,
            "imap_tls": imap_tls, "smtp_host": smtp_host, "smtp_port": smtp_port, "smtp_tls": smtp_tls,
            "tls_ca_file": ca, "authserv_id": authserv_id,
        }.items() if v is not None}
    if secret:
        entry["password"] = {"secret": secret}
    config = _validated(name, {**entry, "password": {"secret": secret or "x"}}, pinning=pin)
    if pin:
        entry["tls_fingerprint"] = _pin(config)
    path = _add(settings, name, entry, str(login), test)
    saved = settings.accounts[name]
    where = saved.url if isinstance(saved, DavAccountConfig) else address
    say(f"added {'' if kind == 'imap' else kind + ' '}account {name} ({where}) to {path}; its password is the "
        f"keyring entry {getattr(saved.password, 'secret', '')}")


def _pin(config: AccountConfig) -> str:
    """Read the server's certificate fingerprint, show it to compare, and return it."""
    from urllib.parse import urlsplit

    from integrations.mail_account import peer_fingerprint

    if isinstance(config, DavAccountConfig):
        where = urlsplit(config.url or "")
        host, port, starttls, what = where.hostname or "", where.port or 443, False, config.url
        shown = "the one the server shows"
    else:
        assert config.imap_host and config.imap_port
        host, port, starttls = config.imap_host, config.imap_port, config.imap_tls == "starttls"
        what, shown = f"{host}:{port}", "the one your mail app (Proton Bridge: its settings) shows"
    try:
        found = peer_fingerprint(host, port, starttls_imap=starttls)
    except Exception as exc:  # noqa: BLE001 - one clear line
        fail(f"could not read the certificate of {what}: {exc}")
    say(f"The server's certificate has SHA-256 {found}: check that it is {shown}.")
    return found


def _validated(name: str, entry: dict[str, Any], pinning: bool = False) -> AccountConfig:
    from orchestrator.tools.account_admin import AccountError, validated

    try:
        return validated(name, entry, pinning=pinning)
    except AccountError as exc:
        fail(str(exc))


@accounts_app.command("list")
def list_(ctx: typer.Context) -> None:
    """The accounts, what each provides, their servers, how their TLS is trusted and how their last test went; the
    Google sign-in too (kind google), or how to connect it."""
    from orchestrator.tools.account_admin import google_hint, last_tests, listed

    settings = state(ctx).settings
    accounts = listed(settings)
    if not accounts:
        say("No accounts: add one with `jarvis accounts add NAME --address you@example.com`.")
    tests = last_tests(settings)
    for d in accounts:
        last = tests.get(d["name"])
        tested = "never tested" if last is None else (
            f"last test {'worked' if last['ok'] else 'FAILED'} {time.strftime('%Y-%m-%d %H:%M', time.localtime(last['at']))}")
        provides = ", ".join(d["provides"])
        if d["kind"] == "google":
            say(f"{d['name']}: google ({provides}) {d['servers']}; {tested}")
            continue
        kind = "" if d["kind"] == "imap" else f"{d['kind']} "
        say(f"{d['name']}: {kind}{d['who']} ({d['preset'] or 'custom'}) {d['servers']}, TLS trusted by {d['trust']}; "
            f"provides {provides}; {tested}")
    hint = google_hint(settings)
    if hint:
        say(hint)


@accounts_app.command("test")
def test_(ctx: typer.Context, name: str) -> None:
    """Log in to the account's servers (IMAP and SMTP; CalDAV or CardDAV; Google: renew its sign-in's token)."""
    from integrations.base import ToolError
    from orchestrator.tools.account_admin import AccountError, test

    try:
        say(test(state(ctx).settings, name))
    except (AccountError, ToolError) as exc:
        fail(str(exc))


@accounts_app.command("remove")
def remove(ctx: typer.Context, name: str) -> None:
    """Remove an account you added (its password stays in the keyring until `jarvis secrets delete`; Google:
    `jarvis auth google --logout`)."""
    from orchestrator.tools.account_admin import AccountError, remove

    try:
        say(remove(state(ctx).settings, name))
    except AccountError as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    app.add_typer(accounts_app, name="accounts")
