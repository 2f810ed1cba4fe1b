"""The mail accounts of the settings (`accounts:`) made into connections and tools: each account's password is
read from the keyring when a connection is made (not when Jarvis starts), so a password changed with
`jarvis secrets set` is used at once and an account whose secret is missing fails only its own calls."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from integrations.base import ToolError
from integrations.mail_account import MailAccount

from orchestrator.core import secrets
from orchestrator.core.account_config import MailAccountConfig
from orchestrator.core.config import Settings


def mail_account(name: str, config: MailAccountConfig) -> MailAccount:
    def password() -> str:
        try:
            value = secrets.resolve(config.password, what=f"accounts.{name}.password")
        except secrets.SecretError as exc:
            raise ToolError(f"Mail account {name!r}: {exc}") from None
        if not value:
            raise ToolError(f"Mail account {name!r} has no password: run `jarvis secrets set`.")
        return value

    assert config.imap_host and config.smtp_host and config.imap_port and config.smtp_port  # filled by the model
    return MailAccount(name=name, address=config.address, user=config.user or config.address, password=password,
                       imap_host=config.imap_host, imap_port=config.imap_port, imap_tls=config.imap_tls or "tls",
                       smtp_host=config.smtp_host, smtp_port=config.smtp_port, smtp_tls=config.smtp_tls or "tls",
                       tls_fingerprint=config.tls_fingerprint, tls_ca_file=config.tls_ca_file,
                       authserv_id=(tuple(config.authserv_id) if isinstance(config.authserv_id, list)
                                    else config.authserv_id), timeout_s=config.timeout_s)


def mail_accounts(settings: Settings) -> dict[str, MailAccount]:
    return {name: mail_account(name, config) for name, config in settings.accounts.items()
            if isinstance(config, MailAccountConfig)}


def mail_tools(settings: Settings) -> list[BaseTool]:
    """mail_search, mail_read_thread, mail_draft_reply and mail_send_draft over the IMAP accounts, then Gmail (the
    account `google`, as in `jarvis accounts` and the calendar tools; `gmail`, its name before, still understood
    unless an IMAP account has that name; left out when an IMAP account is named `google`). With no IMAP account
    they carry Gmail's state: not offered to the model, and shown in the Tools view as not connected, until
    `jarvis auth google`."""
    from integrations.base import with_meta
    from integrations.gmail_tools import gmail_provider
    from integrations.imap_tools import imap_provider
    from integrations.mail_tools import MailProvider, build_mail_tools

    from .google_auth import GOOGLE_ACCOUNT, OLD_MAIL_NAME, google_api, google_availability, google_listed

    providers: dict[str, MailProvider] = {name: imap_provider(account)
                                          for name, account in mail_accounts(settings).items()}
    if google_listed(settings):
        providers[GOOGLE_ACCOUNT] = gmail_provider(google_api(settings, "Gmail", settings.google.gmail_base_url),
                                                   GOOGLE_ACCOUNT)
    tools = build_mail_tools(providers, aliases={OLD_MAIL_NAME: GOOGLE_ACCOUNT})
    if list(providers) != [GOOGLE_ACCOUNT] or not google_listed(settings):
        return tools
    connected = google_availability(settings)  # Gmail alone: not offered to the model until it is connected
    return [with_meta(tool, unavailable=connected) for tool in tools]
