"""The provider-neutral mail tools over every mail account: mail_search, mail_read_thread, mail_draft_reply and
mail_send_draft (email_send, asked first with every recipient shown).

Each account is a `MailProvider` (an IMAP/SMTP account: imap_tools.imap_provider; Gmail:
gmail_tools.gmail_provider). Every id a provider returns starts with its account's name (`home:123:45:INBOX`,
`google:<thread>:<message>`), so the calls after a search go to the account that gave the id, and an id naming no
account is refused. An account's old name (`aliases`: Gmail was `gmail` before it was `google`) is understood as
the account and at the start of an id, so a call written, or an id kept, before the rename still goes there. Mail is outside content: no tool here has a trusted output, and the ids are opaque, trusted
only from a trusted tool's result (tools/provenance), as Gmail's own are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool


@dataclass(frozen=True)
class MailProvider:
    """One account's four operations (each takes the tool's own arguments) and the send question."""

    search: Callable[..., dict]
    read_thread: Callable[[str], dict]
    draft_reply: Callable[[str, str], dict]
    send_draft: Callable[[str], dict]
    describe_send: Callable[[dict], str]


class SearchArgs(BaseModel):
    query: str = Field("", description="words to find in the messages (empty: every message)")
    account: str | None = Field(None, description="the account's name; default: the first account")
    folder: str = Field("INBOX", description="the folder to search")
    from_address: str | None = Field(None, description="only messages from this sender")
    unread_only: bool = Field(False, description="only unread messages")
    max_results: int = Field(20, ge=1, le=100, description="how many messages at most (newest first)")
    offset: int = Field(0, ge=0, description="skip this many (the next_offset of the previous page)")


class ThreadArgs(BaseModel):
    message_id: str = Field(description="the message id from mail_search")


class DraftReplyArgs(BaseModel):
    message_id: str = Field(description="the message to reply to, from mail_search or mail_read_thread")
    body_md: str = Field(description="the reply, in Markdown (sent as plain text and HTML)")


class SendDraftArgs(BaseModel):
    draft_id: str = Field(description="the draft id returned by mail_draft_reply")


def build_mail_tools(providers: dict[str, MailProvider], aliases: dict[str, str] | None = None) -> list[BaseTool]:
    """The four tools over `providers` (by account name, the first the default); `aliases` maps an old name to an
    account's name (an alias that is itself an account's name, or names no account, is not used)."""
    renamed = {old: new for old, new in (aliases or {}).items() if old not in providers and new in providers}

    def account_of(name: str | None) -> tuple[str, MailProvider]:
        if not providers:
            raise ToolError("No mail account is set up: run `jarvis accounts add`.")
        if not name:
            return next(iter(providers.items()))
        name = renamed.get(name, name)
        if name not in providers:
            raise ToolError(f"No mail account named {name!r}; the accounts are: {', '.join(providers)}.")
        return name, providers[name]

    def owner(ref: str, what: str) -> MailProvider:
        name = (ref or "").strip().partition(":")[0]
        name = renamed.get(name, name)
        if name not in providers:
            raise ToolError(f"{ref!r} is not a {what}: take it from mail_search (it begins with the account's name, "
                            f"one of {', '.join(providers) or 'no account'}).")
        return providers[name]

    def mail_search(query: str = "", account: str | None = None, folder: str = "INBOX",
                    from_address: str | None = None, unread_only: bool = False, max_results: int = 20,
                    offset: int = 0) -> dict:
        """Search an email account's folder (newest first, a page at a time). Returns messages with id, from, to,
        subject, date, unread and sender_verified, and next_offset when there are more; read one with
        mail_read_thread(id)."""
        name, provider = account_of(account)
        return provider.search(query=query, account=name, folder=folder, from_address=from_address,
                               unread_only=unread_only, max_results=max_results, offset=offset)

    def mail_read_thread(message_id: str) -> dict:
        """Read a message and the others of its thread: each one's sender, recipients, date, subject, text body and
        whether the account's server verified the sender."""
        return owner(message_id, "message id").read_thread(message_id)

    def mail_draft_reply(message_id: str, body_md: str) -> dict:
        """Save a draft reply to a message in its account (To, subject and threading headers set from it). Nothing
        is sent: send it afterwards with mail_send_draft(draft_id)."""
        if not body_md.strip():
            raise ToolError("The reply is empty: pass its text in body_md.")
        return owner(message_id, "message id").draft_reply(message_id, body_md)

    def mail_send_draft(draft_id: str) -> dict:
        """Send a draft made with mail_draft_reply. This sends the email; the user is asked first."""
        return owner(draft_id, "draft id").send_draft(draft_id)

    def describe_send(args: dict) -> str:
        draft_id = str(args.get("draft_id", ""))
        try:
            provider = owner(draft_id, "draft id")
        except ToolError as exc:
            return f"Send the email draft {draft_id!r}, which names no account ({exc}): approving sends nothing."
        return provider.describe_send({"draft_id": draft_id})

    def describe_draft(args: dict) -> str:
        body = " ".join(str(args.get("body_md", "")).split())
        return f"Save a draft reply to email {args.get('message_id')}: {body[:120]!r}"

    return [
        # mail is outside content: no trusted_output (tools/provenance: the ids below are opaque, trusted only
        # from a trusted tool's result, as Gmail's are)
        make_tool(mail_search, args_schema=SearchArgs),
        make_tool(mail_read_thread, args_schema=ThreadArgs),
        make_tool(mail_draft_reply, args_schema=DraftReplyArgs, side_effects=["email_draft"],
                  summarize=describe_draft, deciding_args=("message_id",), opaque_args=("message_id",)),
        make_tool(mail_send_draft, args_schema=SendDraftArgs, side_effects=["email_send"], summarize=describe_send,
                  deciding_args=("draft_id",), opaque_args=("draft_id",)),
    ]

