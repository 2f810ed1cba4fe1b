"""The Google sign-in: google-auth-oauthlib's installed-app flow, the token kept in the OS keyring.

`jarvis auth google` runs the flow once (client secrets file from `google.client_secrets`); the resulting
credentials (refresh token included) are stored as one keyring entry per account. The Gmail and Calendar
tools load them through `load_credentials`, and google-auth refreshes the access token when it expires;
`save_credentials` stores the refreshed one. `google.token_uri` overrides the token endpoint (tests).

The sign-in is one account, named `google` (GOOGLE_ACCOUNT) wherever accounts are named: `jarvis accounts`,
Settings, and the provider-neutral mail and calendar tools (the mail tools called it `gmail` before: still
understood there, as an account and at the start of an id). An account of `accounts:` written by hand with that
name keeps it, and the sign-in is then left out of those lists and tools (its gmail_* and gcal_* tools stay).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from integrations.availability import Availability
from integrations.google_api import GoogleApi

from orchestrator.core import secrets
from orchestrator.core.config import Settings

log = logging.getLogger(__name__)

SCOPES = [
    "https://www.googleapis.com/auth/gmail.readonly",
    "https://www.googleapis.com/auth/gmail.compose",
    "https://www.googleapis.com/auth/calendar.events",
    "https://www.googleapis.com/auth/calendar.readonly",
]


class GoogleAuthError(Exception):
    """The sign-in cannot run; the message says what to fix."""


GOOGLE_ACCOUNT = "google"
OLD_MAIL_NAME = "gmail"  # the neutral mail tools' name for it before it was `google`


def google_listed(settings: Settings) -> bool:
    """Whether the sign-in is the account GOOGLE_ACCOUNT (not when `accounts:` has one of that name)."""
    return GOOGLE_ACCOUNT not in settings.accounts


def sign_in_check(settings: Settings) -> tuple[bool | None, str, str | None]:
    """Signed in, and the stored token still renews: one refresh against Google's token endpoint (a revoked or
    expired sign-in fails there, and every Gmail or Calendar call would too). The renewed token is not stored.
    Returns (ok, what was found, what to do); ok is None when Google is neither configured nor signed in."""
    creds = load_credentials(settings)
    if creds is None:
        if settings.google.client_secrets is None:
            return None, "not configured (google.client_secrets)", "Run `jarvis auth google`."
        return False, "not signed in (or the stored token is unreadable)", "Run `jarvis auth google`."
    from google.auth.exceptions import RefreshError, TransportError
    from google.auth.transport.requests import Request

    try:
        creds.refresh(Request())
    except RefreshError as exc:
        return (False, f"the sign-in no longer works: {exc}",
                "Run `jarvis auth google` again (the access was revoked or has expired).")
    except TransportError as exc:
        return (False, f"Google's token endpoint could not be reached: {exc}",
                "Check the network; Gmail and Calendar fail until it answers.")
    left = ""
    if creds.expiry is not None:
        minutes = (creds.expiry.replace(tzinfo=timezone.utc) - datetime.now(timezone.utc)).total_seconds() / 60
        left = f" (each access token lasts about {minutes:.0f} min and is renewed by itself)"
    return True, "signed in; the token renews" + left, None


def token_secret_name(settings: Settings) -> str:
    return f"google_token_{settings.google.account}"


def google_unavailable(settings: Settings) -> str | None:
    """Why the Google tools cannot run now (ToolMeta `unavailable`, asked when the Tools view is drawn), or None."""
    try:
        signed_in = load_credentials(settings) is not None
    except Exception:  # noqa: BLE001 - no keyring, an unreadable token: not connected either way
        signed_in = False
    return None if signed_in else "Google is not connected: run `jarvis auth google`"


def google_availability(settings: Settings) -> Availability:
    """google_unavailable as the Google tools' shared, cached answer (their ToolMeta `unavailable`): while it says
    why, the catalog does not offer them to the model."""
    return Availability(lambda: google_unavailable(settings))


def load_credentials(settings: Settings) -> Any:
    """The stored credentials (google.oauth2.credentials.Credentials), or None when not signed in."""
    from google.oauth2.credentials import Credentials

    raw = secrets.get_secret(token_secret_name(settings), required=False)
    if not raw:
        return None
    try:
        info = json.loads(raw)
        creds = Credentials.from_authorized_user_info(info, info.get("scopes") or SCOPES)
    except (ValueError, KeyError) as exc:
        log.warning("the stored Google token is unreadable (%s); run `jarvis auth google` again", exc)
        return None
    if settings.google.token_uri:
        creds = creds.with_token_uri(settings.google.token_uri)
    if creds.refresh_token:
        secrets.remember(creds.refresh_token)
    if creds.token:
        secrets.remember(creds.token)
    return creds


def save_credentials(settings: Settings, creds: Any) -> None:
    secrets.set_secret(token_secret_name(settings), creds.to_json())
    if creds.token:
        secrets.remember(creds.token)


def forget(settings: Settings) -> bool:
    return secrets.delete_secret(token_secret_name(settings))


def run_installed_app_flow(settings: Settings, *, open_browser: bool = True, port: int = 0,
                           timeout_s: float | None = 300) -> Any:
    """Sign in through the browser and store the token. Returns the credentials."""
    from google_auth_oauthlib.flow import InstalledAppFlow

    path = settings.google.client_secrets
    if path is None:
        raise GoogleAuthError(
            "google.client_secrets is not set: create an OAuth client of type 'Desktop app' in the Google Cloud "
            "console, download its JSON, and set google.client_secrets to its path in the config."
        )
    if not path.is_file():
        raise GoogleAuthError(f"google.client_secrets points to {path}, which does not exist.")
    try:
        flow = InstalledAppFlow.from_client_secrets_file(str(path), scopes=SCOPES)
    except ValueError as exc:
        raise GoogleAuthError(f"{path} is not an OAuth client secrets file of a desktop app ({exc}).") from None
    if settings.google.token_uri:
        flow.client_config["token_uri"] = settings.google.token_uri
    try:
        creds = flow.run_local_server(
            host="localhost", port=port, open_browser=open_browser, timeout_seconds=timeout_s,
            authorization_prompt_message="Open this address in a browser to let Jarvis use your Google account:\n{url}",
            success_message="Jarvis is connected to your Google account; you can close this tab.",
        )
    except Exception as exc:  # noqa: BLE001 - oauthlib raises many kinds; one line for the user
        raise GoogleAuthError(f"the Google sign-in did not complete: {type(exc).__name__}: {exc}") from None
    if creds is None:
        raise GoogleAuthError("the Google sign-in timed out before the browser came back; run it again.")
    save_credentials(settings, creds)
    return creds


def google_api(settings: Settings, service: str, base_url: str):
    """A GoogleApi for the tools, loading and saving credentials through the keyring."""
    return GoogleApi(
        base_url,
        lambda: load_credentials(settings),
        lambda creds: save_credentials(settings, creds),
        service=service,
        timeout_s=settings.google.timeout_s,
        max_retries=settings.google.max_retries,
        backoff_s=settings.google.backoff_s,
    )
