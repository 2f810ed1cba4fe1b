"""Apple Mail, Calendar and Notes through Macuse (an MCP server built into the Macuse macOS app).

Typed tools with Jarvis side effects, each calling one Macuse tool. Which Macuse tool and with which arguments
comes from the `[wrappers.<tool>]` tables of mcp/macuse.toml, so a Macuse release that renames a tool or an
argument is fixed in that file, not here. In `arguments`, a string that is exactly "{name}" is replaced by the
wrapper's argument `name` (keeping its type); a key whose value is None, or a table holding a placeholder
that is None, is left out.

This module imports nothing from `orchestrator`: the caller passes a backend (call a tool of the server, and
read a tool's input schema).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from .base import ToolError, make_tool


class McpBackend(Protocol):
    server: str

    def input_schema(self, tool: str) -> dict[str, Any] | None: ...

    async def call(self, tool: str, arguments: dict[str, Any]) -> str: ...


class MailListArgs(BaseModel):
    query: str | None = Field(None, description="words to look for in subject or sender; empty: the latest mail")
    mailbox: str = Field("Inbox", description="a role word (Inbox, Drafts, Sent, Archive, Junk, Trash) or a folder path")
    limit: int = Field(20, ge=1, le=100, description="at most this many messages")


class MailDraftReplyArgs(BaseModel):
    message_id: str = Field(..., description="the id of the message to answer, from apple_mail_list_threads")
    body: str = Field(..., description="the reply text")
    reply_all: bool = Field(False, description="answer every recipient, not only the sender")


class MailSendArgs(BaseModel):
    to: list[str] = Field(..., min_length=1, description="recipient email addresses")
    subject: str
    body: str
    cc: list[str] | None = None


class CalendarCreateArgs(BaseModel):
    title: str
    start: str = Field(..., description="ISO 8601 with a UTC offset, e.g. 2026-08-03T14:00:00+02:00")
    end: str = Field(..., description="ISO 8601 with a UTC offset, after start")
    calendar: str | None = Field(None, description="the calendar's title; default: the default calendar")
    location: str | None = None
    notes: str | None = None


class NotesCreateArgs(BaseModel):
    title: str
    body: str = Field(..., description="the note's content (Markdown)")
    folder: str | None = Field(None, description="a folder path such as Work/Projects; default: the default folder")


@dataclass(frozen=True)
class WrapperSpec:
    name: str
    args: type[BaseModel]
    description: str
    side_effects: tuple[str, ...]
    summary: Callable[[dict[str, Any]], str]


# What each wrapper's call acts on (tools/provenance.py): its recipients, its time, where it files; ids of a message
# are opaque (trusted only from a trusted tool's result).
WRAPPER_DECIDING: dict[str, tuple[str, ...]] = {
    "apple_mail_draft_reply": ("message_id",),
    "apple_mail_send": ("to", "cc"),
    "apple_calendar_create_event": ("start", "end", "calendar"),
    "apple_notes_create_note": ("folder",),
}
WRAPPER_OPAQUE: dict[str, tuple[str, ...]] = {"apple_mail_draft_reply": ("message_id",)}

WRAPPERS: dict[str, WrapperSpec] = {s.name: s for s in [
    WrapperSpec("apple_mail_list_threads", MailListArgs,
                "List or search messages in Apple Mail on this Mac (subject, sender, date, id).", (),
                lambda a: f"List Apple Mail messages in {a.get('mailbox', 'Inbox')}."),
    WrapperSpec("apple_mail_draft_reply", MailDraftReplyArgs,
                "Write a reply to an Apple Mail message and leave it as a draft (nothing is sent).",
                ("email_draft",),
                lambda a: f"Draft a reply in Apple Mail to message {a.get('message_id')}: {str(a.get('body', ''))[:80]!r}"),
    WrapperSpec("apple_mail_send", MailSendArgs,
                "Send a new email from Apple Mail on this Mac.", ("email_send",),
                lambda a: f"Send an email from Apple Mail to {', '.join(a.get('to') or [])}: {a.get('subject')!r}"),
    WrapperSpec("apple_calendar_create_event", CalendarCreateArgs,
                "Create an event in the macOS Calendar app.", ("calendar_write",),
                lambda a: f"Create the Calendar event {a.get('title')!r} from {a.get('start')} to {a.get('end')}."),
    WrapperSpec("apple_notes_create_note", NotesCreateArgs,
                "Create a note in Apple Notes on this Mac.", ("note_write",),
                lambda a: f"Create the Apple Note {a.get('title')!r}."),
]}

_PLACEHOLDER = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_MISSING = object()


def fill_arguments(template: Mapping[str, Any] | None, values: Mapping[str, Any]) -> dict[str, Any]:
    """The server's arguments from a wrapper's template and its call values (see the module docstring)."""
    if template is None:
        return {k: v for k, v in values.items() if v is not None}

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            m = _PLACEHOLDER.match(value)
            if m:
                return values.get(m.group(1))
            return value
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                filled = fill(v)
                if filled is None and isinstance(v, str) and _PLACEHOLDER.match(v):
                    return _MISSING  # a table with a missing placeholder is left out whole
                if filled is _MISSING or filled is None:
                    continue
                out[k] = filled
            return out
        if isinstance(value, list):
            return [x for x in (fill(v) for v in value) if x is not None and x is not _MISSING]
        return value

    result = {}
    for key, value in template.items():
        filled = fill(value)
        if filled is None or filled is _MISSING:
            continue
        result[key] = filled
    return result


def check_against_schema(server: str, wrapper: str, tool: str, arguments: dict[str, Any],
                         schema: dict[str, Any] | None, config_hint: str) -> None:
    """Fail with what to change in the TOML file when the arguments cannot fit the server's tool."""
    if not schema:
        return
    props = schema.get("properties") or {}
    missing = [r for r in schema.get("required") or [] if r not in arguments]
    if missing:
        raise ToolError(f"{server}'s {tool} needs {', '.join(missing)}, which {wrapper} does not send; "
                        f"map it under [wrappers.{wrapper}] arguments in {config_hint}")
    if schema.get("additionalProperties") is False and props:
        unknown = [k for k in arguments if k not in props]
        if unknown:
            raise ToolError(f"{server}'s {tool} has no argument {', '.join(unknown)} (it takes {', '.join(props)}); "
                            f"fix [wrappers.{wrapper}] arguments in {config_hint}")


def build_wrapper(spec: WrapperSpec, backend: McpBackend, tool: str, template: Mapping[str, Any] | None,
                  config_hint: str) -> BaseTool:
    async def run(**kwargs: Any) -> str:
        values = spec.args.model_validate(kwargs).model_dump()
        arguments = fill_arguments(template, values)
        check_against_schema(backend.server, spec.name, tool, arguments, backend.input_schema(tool), config_hint)
        return await backend.call(tool, arguments)

    def run_sync(**kwargs: Any) -> str:  # pragma: no cover - the executor runs async-only tools on its loop
        raise ToolError(f"{spec.name} runs asynchronously; call it through Jarvis's tool executor")

    t = make_tool(run_sync, coroutine=run, args_schema=spec.args, name=spec.name,
                  description=f"{spec.description} (Macuse on macOS)", side_effects=spec.side_effects,
                  # what the server answers is its own text (a draft can quote the mail it replies to), as the
                  # raw MCP tools' answers are: outside content, whatever the wrapper's effect
                  summarize=spec.summary,
                  deciding_args=WRAPPER_DECIDING.get(spec.name), opaque_args=WRAPPER_OPAQUE.get(spec.name, ()),
                  # A hand-written integration (source "static": jorb scripts see jarvis.apple.mail_send) over an MCP tool.
                  server=backend.server, mcp_name=tool, wrapper=True)
    t.func = None  # async-only, like the MCP tools it wraps
    return t


def build_apple_tools(backend: McpBackend, mapping: Mapping[str, Any], available: set[str],
                      config_hint: str) -> tuple[list[BaseTool], dict[str, str]]:
    """The wrappers whose mapped tool the server offers, and why each other one is left out."""
    tools: list[BaseTool] = []
    problems: dict[str, str] = {}
    for name, spec in WRAPPERS.items():
        entry = mapping.get(name)
        if entry is None:
            problems[name] = f"no [wrappers.{name}] table in {config_hint}"
            continue
        tool = entry.tool if hasattr(entry, "tool") else entry["tool"]
        template = entry.arguments if hasattr(entry, "arguments") else entry.get("arguments")
        if tool not in available:
            problems[name] = (f"{backend.server} has no tool {tool!r}; set [wrappers.{name}] tool = ... in {config_hint} "
                              f"(`jarvis mcp tools` lists what it offers)")
            continue
        tools.append(build_wrapper(spec, backend, tool, template, config_hint))
    return tools, problems


Caller = Callable[[str, dict[str, Any]], Awaitable[str]]
