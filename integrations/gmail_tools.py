"""Gmail tools over the REST API: search, read a thread, draft a reply (email_draft), send a draft (email_send).

Sending is a separate tool from drafting, so the autonomy policy can let Jarvis draft freely and still ask
before anything leaves the mailbox. Email bodies are untrusted content: the tools that return them say so.
`gmail_provider` makes Gmail one account of the neutral mail tools (integrations/mail_tools.py).
"""

from __future__ import annotations

import base64
import logging
import re
from email.utils import getaddresses
from html.parser import HTMLParser
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool, tool_meta
from .google_api import GoogleApi
from .mail_headers import UnsafeMessage, checked_bytes, reply_message
from .mail_tools import MailProvider

log = logging.getLogger(__name__)

API = "/gmail/v1/users/me"
MAX_BODY_CHARS = 8000
_HEADERS = ["From", "To", "Cc", "Subject", "Date", "Message-ID", "References", "In-Reply-To", "Reply-To"]


class SearchArgs(BaseModel):
    query: str = Field(description="Gmail search syntax, e.g. 'from:alice is:unread', 'subject:invoice newer_than:7d'")
    max_results: int = Field(20, ge=1, le=200, description="how many messages at most")


class ThreadArgs(BaseModel):
    thread_id: str = Field(description="the thread id from gmail_search")


class DraftReplyArgs(BaseModel):
    thread_id: str = Field(description="the thread to reply to")
    body_md: str = Field(description="the reply, in Markdown (sent as plain text and HTML)")


class SendDraftArgs(BaseModel):
    draft_id: str = Field(description="the draft id returned by gmail_draft_reply")


def _quoted(text: str, limit: int) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _headers(payload: dict) -> dict[str, str]:
    return {h.get("name", "").lower(): h.get("value", "") for h in (payload or {}).get("headers") or []}


def _b64decode(data: str) -> str:
    raw = base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    return raw.decode("utf-8", errors="replace")


class _TextOfHtml(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style", "head"):
            self._skip += 1
        elif tag in ("br", "p", "div", "li", "tr", "h1", "h2", "h3"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _TextOfHtml()
    parser.feed(html)
    text = "".join(parser.parts)
    return re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", text)).strip()


def message_body(payload: dict) -> str:
    """The text of a message: text/plain preferred, else text/html turned to text; attachments named."""
    plain: list[str] = []
    html: list[str] = []
    attachments: list[str] = []

    def walk(part: dict) -> None:
        mime = (part.get("mimeType") or "").lower()
        body = part.get("body") or {}
        if part.get("filename"):
            attachments.append(part["filename"])
        elif mime == "text/plain" and body.get("data"):
            plain.append(_b64decode(body["data"]))
        elif mime == "text/html" and body.get("data"):
            html.append(_b64decode(body["data"]))
        for sub in part.get("parts") or []:
            walk(sub)

    walk(payload or {})
    text = "\n".join(plain).strip() or html_to_text("\n".join(html))
    if len(text) > MAX_BODY_CHARS:
        text = text[:MAX_BODY_CHARS] + f"\n[... {len(text) - MAX_BODY_CHARS} more characters]"
    if attachments:
        text += "\n[attachments: " + ", ".join(attachments) + "]"
    return text


def _summary(msg: dict) -> dict[str, Any]:
    h = _headers(msg.get("payload") or {})
    return {
        "id": msg.get("id"),
        "thread_id": msg.get("threadId"),
        "from": h.get("from", ""),
        "to": h.get("to", ""),
        "subject": h.get("subject", ""),
        "date": h.get("date", ""),
        "snippet": msg.get("snippet", ""),
        "unread": "UNREAD" in (msg.get("labelIds") or []),
    }


def markdown_to_html(md: str) -> str:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).render(md)


def build_gmail_tools(api: GoogleApi) -> list[BaseTool]:
    def gmail_search(query: str, max_results: int = 20) -> list[dict]:
        """Search Gmail with Gmail's query syntax (from:, to:, subject:, is:unread, newer_than:7d, ...). Returns
        messages with id, thread_id, from, to, subject, date, snippet and unread; read one with gmail_get_thread."""
        found = []
        for ref in api.paginate(f"{API}/messages", {"q": query}, "messages", max_results, page_cap=100):
            msg = api.request("GET", f"{API}/messages/{ref['id']}",
                              params={"format": "metadata", "metadataHeaders": ["From", "To", "Subject", "Date"]},
                              what=f"Message {ref['id']}")
            found.append(_summary(msg))
        return found

    def _thread(thread_id: str, fmt: str = "full") -> dict:
        if not thread_id.strip():
            raise ToolError("No thread_id given: take it from gmail_search.")
        return api.request("GET", f"{API}/threads/{thread_id}", params={"format": fmt}, what=f"Thread {thread_id}")

    def gmail_get_thread(thread_id: str) -> dict:
        """Read a whole email thread: every message's sender, recipients, date, subject and text body."""
        thread = _thread(thread_id)
        messages = []
        for msg in thread.get("messages") or []:
            h = _headers(msg.get("payload") or {})
            messages.append({"id": msg.get("id"), "from": h.get("from", ""), "to": h.get("to", ""), "cc": h.get("cc", ""),
                             "date": h.get("date", ""), "subject": h.get("subject", ""),
                             "body": message_body(msg.get("payload") or {})})
        subject = messages[0]["subject"] if messages else ""
        return {"thread_id": thread.get("id", thread_id), "subject": subject, "messages": messages}

    _me: dict[str, str] = {}

    def my_address() -> str:
        if "email" not in _me:
            profile = api.request("GET", f"{API}/profile") or {}
            _me["email"] = (profile.get("emailAddress") or "").lower()
        return _me["email"]

    def gmail_draft_reply(thread_id: str, body_md: str) -> dict:
        """Create a draft reply to the last message of a thread (To, subject and threading headers are set from
        it). Nothing is sent: send it afterwards with gmail_send_draft(draft_id)."""
        if not body_md.strip():
            raise ToolError("The reply is empty: pass its text in body_md.")
        thread = _thread(thread_id, "metadata")
        messages = thread.get("messages") or []
        if not messages:
            raise ToolError(f"Thread {thread_id} has no messages to reply to.")
        me = my_address()
        last = messages[-1]
        h = _headers(last.get("payload") or {})
        try:
            mail, to = reply_message(h, me, body_md, markdown_to_html(body_md))
        except UnsafeMessage:
            raise ToolError(f"The last message of thread {thread_id} has no sender to reply to.") from None
        subject = str(mail["Subject"])
        try:
            data = checked_bytes(mail, [a for _, a in getaddresses([to]) if a])
        except UnsafeMessage as exc:
            raise ToolError(str(exc)) from None
        raw = base64.urlsafe_b64encode(data).decode("ascii")
        draft = api.request("POST", f"{API}/drafts", json={"message": {"raw": raw, "threadId": thread_id}},
                            what="The draft")
        return {"draft_id": draft.get("id"), "thread_id": thread_id, "to": to, "subject": subject,
                "status": "draft saved, not sent"}

    def gmail_send_draft(draft_id: str) -> dict:
        """Send a draft created with gmail_draft_reply. This sends the email; the user is asked first."""
        if not draft_id.strip():
            raise ToolError("No draft_id given: take it from gmail_draft_reply.")
        sent = api.request("POST", f"{API}/drafts/send", json={"id": draft_id}, idempotent=False,
                           what=f"Draft {draft_id}")
        return {"sent": True, "message_id": sent.get("id"), "thread_id": sent.get("threadId")}

    def describe_send(args: dict) -> str:
        """Everyone it goes to first (Gmail sends a draft to its Cc and Bcc too), then its subject and how it begins,
        quoted and cut: a subject the thread's sender wrote (`Lunch" to boss@... (draft r7).` and a long pad) pushed
        the real recipient out of sight when it came first."""
        draft_id = str(args.get("draft_id", ""))
        try:
            draft = api.request("GET", f"{API}/drafts/{draft_id}", params={"format": "metadata"}, what="The draft")
        except Exception as exc:  # noqa: BLE001 - said in the question: approving then sends it unseen
            return (f"Send the Gmail draft {draft_id}, whose recipients and text could not be read ({exc}): approve "
                    "only if you know what this draft says and to whom.")
        message = (draft or {}).get("message") or {}
        h = _headers(message.get("payload") or {})
        parts = []
        for label, name in (("to", "to"), ("cc", "cc"), ("bcc", "bcc")):
            found = [a for _, a in getaddresses([h.get(name, "")]) if a]
            if found or h.get(name):
                parts.append(f"{label} {', '.join(found) or repr(h[name])}")
        subject = " ".join(h.get("subject", "").split())
        begins = " ".join(str(message.get("snippet") or "").split())
        return (f"Send the email {'; '.join(parts) or 'to no recipient'} (draft {draft_id}): subject "
                f"{_quoted(subject, 80)}" + (f", beginning {_quoted(begins, 120)}" if begins else "") + ".")

    def describe_draft(args: dict) -> str:
        body = " ".join(str(args.get("body_md", "")).split())
        return f"Save a draft reply in Gmail thread {args.get('thread_id')}: \"{body[:120]}{'...' if len(body) > 120 else ''}\""

    return [
        make_tool(gmail_search, args_schema=SearchArgs),
        make_tool(gmail_get_thread, args_schema=ThreadArgs),
        # its result quotes the thread's Subject and Reply-To, which the email's sender wrote
        make_tool(gmail_draft_reply, args_schema=DraftReplyArgs, side_effects=["email_draft"], summarize=describe_draft,
                  deciding_args=("thread_id",), opaque_args=("thread_id",)),
        make_tool(gmail_send_draft, args_schema=SendDraftArgs, side_effects=["email_send"], summarize=describe_send,
                  trusted_output="Gmail's ids for the message it sent", deciding_args=("draft_id",),
                  opaque_args=("draft_id",)),
    ]


def gmail_provider(api: GoogleApi, name: str = "google") -> MailProvider:
    """Gmail as one provider of the neutral mail tools (integrations/mail_tools.py), through the gmail_* tools above
    (which keep their names). Its ids are `google:<thread id>:<message id>` and `google:<draft id>` (the part before
    the first colon is the account's name, whatever it is: an id of its old name `gmail` reads the same); a draft replies
    to the thread's last message, as gmail_draft_reply does. Gmail's verdict on a sender is not read here: every
    sender is unverified (closed), as in gmail_search."""
    tools = {tool.name: tool for tool in build_gmail_tools(api)}

    def thread_of(ref: str) -> str:
        thread = ref.partition(":")[2].partition(":")[0]
        if not thread:
            raise ToolError(f"{ref!r} is not a Gmail message id: take it from mail_search.")
        return thread

    def search(query: str = "", account: str | None = None, folder: str = "INBOX", from_address: str | None = None,
               unread_only: bool = False, max_results: int = 20, offset: int = 0) -> dict:
        words = [query.strip()] if query.strip() else []
        words += [f"from:{from_address}"] if from_address else []
        words += ["is:unread"] if unread_only else []
        words += [f"in:{folder.lower() if folder.upper() == 'INBOX' else folder}"] if folder else []
        found = tools["gmail_search"].invoke({"query": " ".join(words),
                                              "max_results": min(200, offset + max_results + 1)})
        page = found[offset:offset + max_results]
        messages = [{"id": f"{name}:{m['thread_id']}:{m['id']}", "from": m["from"], "to": m["to"],
                     "subject": m["subject"], "date": m["date"], "unread": m["unread"], "sender_verified": False}
                    for m in page]
        more = len(found) > offset + len(page)
        return {"account": name, "folder": folder, "messages": messages,
                "next_offset": offset + len(page) if more else None}

    def read_thread(message_id: str) -> dict:
        thread = thread_of(message_id)
        got = tools["gmail_get_thread"].invoke({"thread_id": thread})
        return {"account": name, "subject": got["subject"],
                "messages": [{**m, "id": f"{name}:{thread}:{m['id']}", "sender_verified": False}
                             for m in got["messages"]]}

    def draft_reply(message_id: str, body_md: str) -> dict:
        made = tools["gmail_draft_reply"].invoke({"thread_id": thread_of(message_id), "body_md": body_md})
        return {**made, "draft_id": f"{name}:{made['draft_id']}"}

    def draft_of(draft_id: str) -> str:
        return draft_id.partition(":")[2]

    def send_draft(draft_id: str) -> dict:
        return tools["gmail_send_draft"].invoke({"draft_id": draft_of(draft_id)})

    def describe_send(args: dict) -> str:
        return tool_meta(tools["gmail_send_draft"]).summarize({"draft_id": draft_of(str(args.get("draft_id", "")))})

    return MailProvider(search=search, read_thread=read_thread, draft_reply=draft_reply, send_draft=send_draft,
                        describe_send=describe_send)
