"""A stand-in for Macuse's MCP server (macOS only, not available here): its published tool names, over stdio,
on the real `mcp` SDK. Every call is appended to the JSON-lines file named by $FAKE_MACUSE_LOG."""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("fake-macuse", log_level="WARNING")


def _record(tool: str, **args: Any) -> None:
    with open(os.environ["FAKE_MACUSE_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "args": args}) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def mail_search_messages(query: str | None = None, mailbox: str = "Inbox", limit: int = 20) -> str:
    """Search Apple Mail messages."""
    _record("mail_search_messages", query=query, mailbox=mailbox, limit=limit)
    return json.dumps({"messages": [{"id": 4711, "subject": "Dinner on Friday?", "sender": "ana@example.com",
                                     "date_received": "2026-11-20T18:02:00+01:00"}]})


@server.tool()
def mail_reply_message(message: dict, body: str, reply_all: bool = False, send: bool = False) -> str:
    """Reply to a message (send=false leaves a draft)."""
    if message.get("type") != "by_id":
        raise ValueError("Message reference must be by_id, by_reference or by_signature")
    _record("mail_reply_message", message=message, body=body, reply_all=reply_all, send=send)
    return "Reply saved to Drafts" if not send else "Reply sent"


@server.tool()
def mail_compose_message(to: list[str], subject: str, body: str, cc: list[str] | None = None, send: bool = False) -> str:
    """Compose a message."""
    _record("mail_compose_message", to=to, subject=subject, body=body, cc=cc, send=send)
    return "Message sent" if send else "Draft saved"


@server.tool()
def calendar_create_event(title: str, start_date: str, end_date: str, calendar: dict | None = None,
                          location: str | None = None, notes: str | None = None) -> str:
    """Create a calendar event."""
    _record("calendar_create_event", title=title, start_date=start_date, end_date=end_date, calendar=calendar,
            location=location, notes=notes)
    return json.dumps({"id": "EV-1", "title": title})


@server.tool()
def notes_write_note(title: str, content: str, folder: str | None = None) -> str:
    """Create or overwrite a note."""
    _record("notes_write_note", title=title, content=content, folder=folder)
    return "Note created"


if __name__ == "__main__":
    server.run()
