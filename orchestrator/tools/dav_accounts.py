"""The calendar (caldav) and contacts (carddav) accounts of the settings made into connections and tools. Each
account's password is read from the keyring when a connection is made, so a password changed with `jarvis secrets
set` is used at once and an account whose secret is missing fails only its own calls."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from integrations.base import ToolError
from integrations.dav_account import DavAccount

from orchestrator.core import secrets
from orchestrator.core.account_config import DavAccountConfig
from orchestrator.core.config import Settings


def dav_account(name: str, config: DavAccountConfig) -> DavAccount:
    def password() -> str:
        try:
            value = secrets.resolve(config.password, what=f"accounts.{name}.password")
        except secrets.SecretError as exc:
            raise ToolError(f"Account {name!r}: {exc}") from None
        if not value:
            raise ToolError(f"Account {name!r} has no password: run `jarvis secrets set`.")
        return value

    assert config.url  # filled by the model's validator
    return DavAccount(name=name, kind=config.kind, url=config.url, user=config.user, password=password,
                      calendar=config.calendar, tls_fingerprint=config.tls_fingerprint,
                      tls_ca_file=config.tls_ca_file, timeout_s=config.timeout_s)


def dav_accounts(settings: Settings, kind: str) -> dict[str, DavAccount]:
    return {name: dav_account(name, config) for name, config in settings.accounts.items()
            if isinstance(config, DavAccountConfig) and config.kind == kind}


def calendar_tools(settings: Settings) -> list[BaseTool]:
    """calendar_list_events, calendar_find_free_time, calendar_create_event over the caldav accounts, then Google
    Calendar (the account `google`, as in `jarvis accounts` and the mail tools; left out when `accounts:` has an
    account of that name) when Google is connected as the tools are built; none without either. With Google alone
    they carry its state (not offered to the model while it is not connected)."""
    from integrations.base import with_meta
    from integrations.calendar_tools import CalendarProvider, build_calendar_tools
    from integrations.caldav_tools import caldav_provider
    from integrations.gcal_provider import google_calendar_provider
    from integrations.gcal_tools import user_zone

    from .google_auth import GOOGLE_ACCOUNT, google_api, google_availability, google_listed, google_unavailable

    tz = user_zone(settings.timezone)
    providers: dict[str, CalendarProvider] = {name: caldav_provider(account, tz)
                                              for name, account in dav_accounts(settings, "caldav").items()}
    if google_listed(settings) and google_unavailable(settings) is None:
        api = google_api(settings, "Google Calendar", settings.google.calendar_base_url)
        providers[GOOGLE_ACCOUNT] = google_calendar_provider(api, settings.google.calendar_id, tz)
    if not providers:
        return []
    tools = build_calendar_tools(providers, settings.timezone)
    if list(providers) != [GOOGLE_ACCOUNT] or not google_listed(settings):
        return tools
    connected = google_availability(settings)
    return [with_meta(tool, unavailable=connected) for tool in tools]


def dav_tools(settings: Settings) -> list[BaseTool]:
    """The calendar tools (calendar_tools) and contacts_search over the carddav accounts; none without."""
    tools = calendar_tools(settings)
    contacts = dav_accounts(settings, "carddav")
    if contacts:
        from integrations.carddav_tools import build_carddav_tools

        tools += build_carddav_tools(contacts)
    return tools
