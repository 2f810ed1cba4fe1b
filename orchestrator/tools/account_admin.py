"""Adding, testing and removing accounts: one set of rules for `jarvis accounts` and the Settings view.

Accounts are the user's own, so they are written into the user's git-ignored file beside the config
(`config.local.yml`, core/local_settings.py), never into the tracked config. An account written by hand in the
tracked file is read as before, but not rewritten: removing it says where it is instead of failing silently.

`add` checks the entry, logs in to the servers with the password given (held in memory only), and only when both
logins work stores the password in the keyring and the account in the file: a wrong password or a server that
refuses leaves nothing behind (not even a keyring entry), and the error keeps the server's own words.

Each test's outcome (from `add`, `jarvis accounts test` or Settings) is kept in the data folder, so the list can
say when each account last worked.

The Google sign-in (`jarvis auth google`: Gmail and Google Calendar) is one more account, kind `google`, named
`google` (google_auth.GOOGLE_ACCOUNT, the name the neutral mail and calendar tools give it): listed while it is
connected (`google_account`), tested by renewing its token (google_auth.sign_in_check, as `jarvis doctor` does),
but neither added nor removed here: signing in connects it, `jarvis auth google --logout` forgets it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from integrations.base import ToolError

from orchestrator.core import secrets
from orchestrator.core.account_config import AccountConfig, DavAccountConfig, MailAccountConfig
from orchestrator.core.config import Settings
from orchestrator.core.local_settings import NoConfigFile, edit_local, local_path, read_mapping


class AccountError(ValueError):
    """What was wrong and what to do; nothing was changed."""


GOOGLE_ADD = ("A Google account (Gmail and Google Calendar) is connected by signing in, not added: run `jarvis auth "
              "google` (google.client_secrets set in the config first); it is then listed as the account google.")
PROVIDES = {"imap": ("mail",), "caldav": ("calendar",), "carddav": ("contacts",), "google": ("mail", "calendar")}


def is_google(settings: Settings, name: str) -> bool:
    """Whether `name` is the Google sign-in's account (not one of `accounts:`)."""
    from .google_auth import GOOGLE_ACCOUNT, google_listed

    return name == GOOGLE_ACCOUNT and google_listed(settings)


def google_account(settings: Settings) -> dict[str, Any] | None:
    """The Google sign-in as the list shows an account (describe's keys), or None when it is not connected or an
    account of `accounts:` has its name."""
    from .google_auth import GOOGLE_ACCOUNT, google_listed, google_unavailable, token_secret_name

    if not google_listed(settings) or google_unavailable(settings) is not None:
        return None
    secret = token_secret_name(settings)
    return {"name": GOOGLE_ACCOUNT, "kind": "google", "who": "Gmail and Google Calendar", "preset": None,
            "trust": "system CAs", "secret": secret, "provides": list(PROVIDES["google"]),
            "servers": f"Google's APIs, signed in with `jarvis auth google` (the token: keyring entry {secret})"}


def google_hint(settings: Settings) -> str | None:
    """How to connect Google while it is not (None when it is, or when an account of `accounts:` has its name)."""
    from .google_auth import google_listed, google_unavailable

    if not google_listed(settings) or google_unavailable(settings) is None:
        return None
    return "Google (Gmail and Google Calendar) is not connected: run `jarvis auth google` to connect it."


def validated(name: str, entry: dict[str, Any], pinning: bool = False) -> AccountConfig:
    """The entry as the config would read it, or AccountError with the model's reasons. `pinning`: the certificate's
    fingerprint is read after this check, so a placeholder stands in for it."""
    from pydantic import TypeAdapter, ValidationError

    from .google_auth import GOOGLE_ACCOUNT

    if not name or len(name) > 40 or not name.replace("-", "").replace("_", "").isalnum() or not name.isascii():
        raise AccountError(f"account name {name!r}: use letters, digits, - and _ only")
    if name == GOOGLE_ACCOUNT:
        raise AccountError(f"account name {name!r} is the Google sign-in's (`jarvis auth google`): pick another")
    try:
        return TypeAdapter(AccountConfig).validate_python(
            {**entry, **({"tls_fingerprint": "0" * 64} if pinning else {})})
    except ValidationError as exc:
        raise AccountError(f"account {name}: " + "; ".join(e["msg"].removeprefix("Value error, ")
                                                             for e in exc.errors())) from None


def check(name: str, config: AccountConfig, password: str | None = None) -> str:
    """Log in to the account's servers; what was found there, or a ToolError saying what failed. With `password`
    it is used instead of the keyring's (an account not saved yet)."""
    if isinstance(config, DavAccountConfig):
        return _check_dav(name, config, password)
    from integrations.mail_account import connect_imap, connect_smtp

    from .mail_accounts import mail_account

    account = mail_account(name, config)
    if password is not None:
        account = dataclasses.replace(account, password=lambda: password)
    client = connect_imap(account)
    try:
        folders = [f[2] for f in client.list_folders()]
    finally:
        client.logout()
    connect_smtp(account).quit()
    return (f"{name}: IMAP {account.imap_host}:{account.imap_port} ({account.imap_tls}) and SMTP "
            f"{account.smtp_host}:{account.smtp_port} ({account.smtp_tls}) logged in as {account.user}; "
            f"{len(folders)} folders")


def _check_dav(name: str, config: DavAccountConfig, password: str | None) -> str:
    from integrations.carddav_tools import addressbooks
    from integrations.dav_account import dav_client, dav_error

    from .dav_accounts import dav_account

    account = dav_account(name, config)
    if password is not None:
        account = dataclasses.replace(account, password=lambda: password)
    try:
        with dav_client(account) as client:
            found = ([str(c.name) for c in client.principal().calendars()] if account.kind == "caldav"
                     else addressbooks(client, account.url))
    except Exception as exc:  # noqa: BLE001 - one clear sentence
        raise dav_error(account, exc) from None
    what = "calendars" if account.kind == "caldav" else "address books"
    return f"{name}: {account.kind} {account.url} logged in as {account.user}; {len(found)} {what}"


def _check_google(settings: Settings) -> str:
    from .google_auth import GOOGLE_ACCOUNT, sign_in_check

    ok, detail, fix = sign_in_check(settings)
    if not ok:
        raise ToolError(f"{GOOGLE_ACCOUNT}: {detail}. {fix}")
    return f"{GOOGLE_ACCOUNT}: Gmail and Google Calendar, {detail}"


def default_secret(name: str, kind: str) -> str:
    return f"mail_{name}" if kind == "imap" else f"{kind}_{name}"


def add(settings: Settings, name: str, entry: dict[str, Any], password: str, *, test: bool = True) -> tuple[Path, str]:
    """Check, log in (unless `test` is off), then keep the password in the keyring and the account in the user's
    file, and in the running settings. Returns (the file written, what the login found). AccountError or ToolError
    leave everything as it was."""
    if name in settings.accounts:
        raise AccountError(f"there is already an account named {name!r}: remove it first")
    if not password:
        raise AccountError("empty password: nothing saved")
    kind = str(entry.get("kind") or "imap")
    secret = (entry.get("password") or {}).get("secret") or default_secret(name, kind)
    entry = {**entry, "password": {"secret": secret}}
    config = validated(name, entry)
    local_path(settings, "an account")  # no file to keep it in: say so before logging in
    found = ""
    if test:
        try:
            found = check(name, config, password)
        except ToolError as exc:
            record_test(settings, name, False, str(exc))
            raise
    secrets.set_secret(secret, password)

    def change(data: Any) -> None:
        accounts = data.get("accounts")
        if accounts is None:
            data["accounts"] = accounts = {}
        accounts[name] = entry

    path = edit_local(settings, change, "an account")
    settings.accounts[name] = config
    if test:
        record_test(settings, name, True, found)
    return path, found


def tracked_accounts(settings: Settings) -> set[str]:
    """The accounts written in the tracked config file itself (not the user's file)."""
    if settings.source_path is None:
        return set()
    accounts = read_mapping(settings.source_path).get("accounts") or {}
    return set(accounts) if isinstance(accounts, dict) else set()


def remove(settings: Settings, name: str) -> str:
    """Take the account out of the user's file and the running settings; returns what was done. An account of the
    tracked config file is not rewritten there: AccountError says where to remove it."""
    if is_google(settings, name):
        raise AccountError("the Google account is not removed here: `jarvis auth google --logout` forgets its "
                           "sign-in")
    if name not in settings.accounts:
        raise AccountError(f"no account named {name!r}")
    if name in tracked_accounts(settings):
        raise AccountError(f"the account {name!r} is written in {settings.source_path} (the tracked config file, "
                           "which Jarvis does not rewrite): remove it there by hand and restart Jarvis")
    try:
        path = local_path(settings, "an account")
    except NoConfigFile as exc:
        raise AccountError(str(exc)) from None
    if name not in (read_mapping(path).get("accounts") or {}):
        raise AccountError(f"the account {name!r} is not in {path}: it comes from a profile or the environment")

    def change(data: Any) -> None:
        data["accounts"].pop(name, None)
        if not data["accounts"]:
            data.pop("accounts")

    edit_local(settings, change, "an account")
    password = settings.accounts.pop(name).password
    secret = getattr(password, "secret", None)
    forget_test(settings, name)
    return f"removed account {name} from {path}" + (
        f"; its password is still the keyring entry {secret} (`jarvis secrets delete {secret}`)" if secret else "")


def test(settings: Settings, name: str) -> str:
    """Log in to a saved account (Google: renew its token), keeping the outcome; ToolError says what failed."""
    if name not in settings.accounts and not is_google(settings, name):
        raise AccountError(f"no account named {name!r}")
    try:
        found = _check_google(settings) if is_google(settings, name) else check(name, settings.accounts[name])
    except ToolError as exc:
        record_test(settings, name, False, str(exc))
        raise
    record_test(settings, name, True, found)
    return found


def _tests_path(settings: Settings) -> Path:
    return settings.data_dir / "account_tests.json"


def last_tests(settings: Settings) -> dict[str, dict[str, Any]]:
    """Each account's last test: {"ok", "message", "at" (epoch seconds)}."""
    try:
        found = json.loads(_tests_path(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_tests(settings: Settings, tests: dict[str, dict[str, Any]]) -> None:
    path = _tests_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(tests, indent=1), encoding="utf-8")
    tmp.replace(path)


def record_test(settings: Settings, name: str, ok: bool, message: str) -> None:
    tests = last_tests(settings)
    tests[name] = {"ok": ok, "message": message, "at": time.time()}
    _write_tests(settings, tests)


def forget_test(settings: Settings, name: str) -> None:
    tests = last_tests(settings)
    if tests.pop(name, None) is not None:
        _write_tests(settings, tests)


def describe(name: str, a: AccountConfig) -> dict[str, Any]:
    """One account as the list shows it (no secret: the keyring entry's name only)."""
    trust = ("pinned " + (a.tls_fingerprint or "")[:16] + "...") if a.tls_fingerprint else \
        (f"CA {a.tls_ca_file}" if a.tls_ca_file else "system CAs")
    secret = getattr(a.password, "secret", None)
    if isinstance(a, DavAccountConfig):
        return {"name": name, "kind": a.kind, "who": a.user, "preset": a.preset, "trust": trust, "secret": secret,
                "provides": list(PROVIDES[a.kind]),
                "servers": f"{a.url}" + (f" calendar {a.calendar!r}" if a.calendar else "")}
    assert isinstance(a, MailAccountConfig)
    return {"name": name, "kind": "imap", "who": a.address, "preset": a.preset, "trust": trust, "secret": secret,
            "provides": list(PROVIDES["imap"]),
            "servers": f"IMAP {a.imap_host}:{a.imap_port} {a.imap_tls}, SMTP {a.smtp_host}:{a.smtp_port} {a.smtp_tls}"}


def listed(settings: Settings) -> list[dict[str, Any]]:
    """Every account as the list shows it: those of `accounts:`, then the Google sign-in while it is connected."""
    google = google_account(settings)
    return [describe(name, a) for name, a in settings.accounts.items()] + ([google] if google else [])
