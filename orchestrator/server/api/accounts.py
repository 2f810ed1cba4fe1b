"""The accounts in the Settings view (the same as `jarvis accounts`, through tools/account_admin.py):
GET /api/accounts (each account, its servers, how its TLS is trusted, its last test), POST /api/accounts (add: an
address and an app password, the preset filling the servers; both servers logged in to before anything is kept;
the password goes to the keyring, the account to the user's config.local.yml), POST /api/accounts/{name}/test and
DELETE /api/accounts/{name}. A refused login answers 400 with the server's own words and keeps nothing. The
Google sign-in is listed as the account `google` (kind google: mail and calendar) while it is connected, and
tested by renewing its token; else the answer's `google_hint` says how to connect it (`jarvis auth google`). It
is not removed here (409: `jarvis auth google --logout`).

A self-signed server (Proton Bridge) is pinned with `jarvis accounts add --pin`, where its fingerprint is shown to
compare: the form does not pin. Behind the UI's own token and origin checks, like every API call."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from integrations.base import ToolError
from integrations.mail_presets import preset_for_address
from orchestrator.core.local_settings import NoConfigFile
from orchestrator.core.secrets import redacted
from orchestrator.tools import account_admin
from . import AppContext, app_context

ROUTER = APIRouter()


class AccountIn(BaseModel):
    name: str = Field(..., min_length=1, max_length=40)
    kind: Literal["mail", "calendar", "contacts"] = "mail"
    address: str = Field(..., min_length=1, max_length=320, description="the address (mail) or the login name")
    password: str = Field(..., min_length=1, max_length=1000)
    preset: str | None = Field(None, max_length=40)
    url: str | None = Field(None, max_length=2000)
    calendar: str | None = Field(None, max_length=200)
    user: str | None = Field(None, max_length=320)
    imap_host: str | None = Field(None, max_length=255)
    imap_port: int | None = None
    imap_tls: Literal["tls", "starttls"] | None = None
    smtp_host: str | None = Field(None, max_length=255)
    smtp_port: int | None = None
    smtp_tls: Literal["tls", "starttls"] | None = None
    tls_ca_file: str | None = Field(None, max_length=1000)
    authserv_id: str | None = Field(None, max_length=255)


def _entry(body: AccountIn) -> dict[str, Any]:
    """The config entry the form describes (what `jarvis accounts add` writes for the same options)."""
    ca = str(Path(body.tls_ca_file).expanduser()) if body.tls_ca_file else None
    if body.kind == "mail":
        values: dict[str, Any] = {
            "address": body.address.strip(), "preset": body.preset, "user": body.user, "imap_host": body.imap_host,
            "imap_port": body.imap_port, "imap_tls": body.imap_tls, "smtp_host": body.smtp_host,
            "smtp_port": body.smtp_port, "smtp_tls": body.smtp_tls, "tls_ca_file": ca,
            "authserv_id": body.authserv_id}
    else:
        login = (body.user or body.address).strip()
        preset = body.preset or preset_for_address(login)
        values = {"kind": "caldav" if body.kind == "calendar" else "carddav", "url": body.url, "user": login,
                  "preset": preset if preset in ("icloud", "fastmail", "nextcloud") else None,
                  "calendar": body.calendar if body.kind == "calendar" else None, "tls_ca_file": ca}
    return {k: v for k, v in values.items() if v not in (None, "")}


@ROUTER.get("/accounts")
def list_accounts(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    tests = account_admin.last_tests(ctx.settings)
    tracked = account_admin.tracked_accounts(ctx.settings)
    return redacted({"accounts": [{**a, "last_test": tests.get(a["name"]), "in_tracked_file": a["name"] in tracked}
                                  for a in account_admin.listed(ctx.settings)],
                     "google_hint": account_admin.google_hint(ctx.settings)})


@ROUTER.post("/accounts")
def add_account(body: AccountIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    try:
        path, found = account_admin.add(ctx.settings, body.name.strip(), _entry(body), body.password)
    except (account_admin.AccountError, NoConfigFile) as exc:
        raise HTTPException(400, redacted(str(exc))) from None
    except ToolError as exc:
        raise HTTPException(400, redacted(f"{exc} The account was not saved.")) from None
    return redacted({"name": body.name.strip(), "message": f"{found}. Saved in {path}; Jarvis's mail, calendar "
                     "and contacts tools use it after a restart of `jarvis run`."})


@ROUTER.post("/accounts/{name}/test")
def test_account(name: str, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    try:
        return redacted({"ok": True, "message": account_admin.test(ctx.settings, name)})
    except account_admin.AccountError as exc:
        raise HTTPException(404, redacted(str(exc))) from None
    except ToolError as exc:
        return redacted({"ok": False, "message": str(exc)})


@ROUTER.delete("/accounts/{name}")
def remove_account(name: str, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    if name not in ctx.settings.accounts and not account_admin.is_google(ctx.settings, name):
        raise HTTPException(404, f"no account named {name!r}")
    try:
        return {"message": account_admin.remove(ctx.settings, name)}
    except account_admin.AccountError as exc:
        raise HTTPException(409, redacted(str(exc))) from None
