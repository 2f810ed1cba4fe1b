"""How every Jarvis tool carries its metadata, whatever made it (hand-written, MCP or generated).

A tool is a LangChain `BaseTool` whose `metadata` holds:
  side_effects      list of effect names (empty: read-only)
  untrusted_output  its result is content from outside the conversation (files, email, web, PDFs...); a tool
                    whose result is so only at times returns a FromOutside string then
  summarize         optional callable(args) -> one plain sentence of what the call will do
  side_effects_for  optional callable(args) -> the effects of this particular call
  sends_out         the tool can carry data off the machine though it declares no effect (an open-world fetch)
  source            "static", "mcp" or "generated"

This module imports nothing from `orchestrator`; the executor reads these keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel

from .effects import KNOWN_SIDE_EFFECTS  # noqa: F401 - re-exported: the tools and the views name effects from here


class ToolError(Exception):
    """A tool failed for a reason the user can act on; the message is shown as the tool's result. `server_text`:
    the failing server's own words, whole (a browser's error names the page it shows, read by tools/site_grants)."""

    def __init__(self, *args: object, server_text: str | None = None):
        super().__init__(*args)
        self.server_text = server_text


def side_effects_of(tool: BaseTool, args: dict[str, Any] | None = None) -> list[str]:
    """The tool's side effects; a tool whose effects depend on its arguments (sending by email or by
    Telegram) carries `side_effects_for(args)` and is judged per call."""
    meta = tool.metadata or {}
    effects_for = meta.get("side_effects_for")
    if args is not None and callable(effects_for):
        return list(effects_for(args))
    return list(meta.get("side_effects") or [])


def confirmation_demand(tool: BaseTool, args: dict[str, Any]) -> str | None:
    """Why this call must be confirmed whatever the autonomy policy says, or None: metadata `requires_confirmation`,
    a reason, or a callable(args) giving one for the calls that need it (a jorb granted autonomy)."""
    demand = (tool.metadata or {}).get("requires_confirmation")
    return demand(args) if callable(demand) else demand


# Effects that carry data off this machine: after untrusted content, a call that can do this is escalated.
SENDS_OUT_EFFECTS = frozenset({"network", "email_send", "message_send"})


def sends_out(tool: BaseTool, effects: Iterable[str] = ()) -> bool:
    """Whether a call can carry data off this machine: a declared sending effect, or a tool that reaches the open
    world though it changes nothing (an MCP fetch annotated read-only: metadata `sends_out`)."""
    return bool((tool.metadata or {}).get("sends_out")) or bool(SENDS_OUT_EFFECTS & set(effects))


class FromOutside(str):
    """A result of a tool whose output is the user's own (no `untrusted_output`) that this time holds text from
    outside the conversation (a reminder an agent program wrote): the call counts as reading outside content."""


def is_untrusted(tool: BaseTool, result: Any = None) -> bool:
    return bool((tool.metadata or {}).get("untrusted_output")) or isinstance(result, FromOutside)


def source_of(tool: BaseTool) -> str:
    return str((tool.metadata or {}).get("source") or "static")


def summarize_call(tool: BaseTool, args: dict[str, Any]) -> str:
    """One plain sentence of what the call will do, for confirmations."""
    summarize = (tool.metadata or {}).get("summarize")
    if callable(summarize):
        try:
            return str(summarize(args))
        except Exception:  # noqa: BLE001 - a bad summarizer must not block the confirmation
            pass
    shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items())
    return f"Run {tool.name}({shown})."


def _short(value: Any, limit: int = 80) -> str:
    """The value as Python writes it (control characters escaped), cut in the middle: the end of a path (the file's
    name) is what a person approving the call most needs to see."""
    text = repr(value)
    keep = (limit - 5) // 2
    return text if len(text) <= limit else f"{text[:keep]} ... {text[-keep:]}"


def set_tool_meta(
    tool: BaseTool,
    *,
    side_effects: Iterable[str] = (),
    untrusted_output: bool = False,
    source: str = "static",
    summarize: Callable[[dict[str, Any]], str] | None = None,
    **extra: Any,
) -> BaseTool:
    tool.metadata = {
        **(tool.metadata or {}),
        "side_effects": list(side_effects),
        "untrusted_output": untrusted_output,
        "source": source,
        **({"summarize": summarize} if summarize else {}),
        **extra,
    }
    return tool


def make_tool(
    func: Callable[..., Any],
    *,
    args_schema: type[BaseModel],
    name: str | None = None,
    description: str | None = None,
    side_effects: Iterable[str] = (),
    untrusted_output: bool = False,
    summarize: Callable[[dict[str, Any]], str] | None = None,
    coroutine: Callable[..., Any] | None = None,
    side_effects_for: Callable[[dict[str, Any]], list[str]] | None = None,
) -> StructuredTool:
    """A StructuredTool with Jarvis metadata. The docstring (or description) is what the model reads.
    `side_effects_for(args)`: the effects of one call, where they depend on its arguments (`side_effects_of`)."""
    tool = StructuredTool.from_function(
        func=func,
        coroutine=coroutine,
        name=name or func.__name__,
        description=(description or func.__doc__ or "").strip(),
        args_schema=args_schema,
        infer_schema=False,
    )
    extra = {"side_effects_for": side_effects_for} if side_effects_for else {}
    return set_tool_meta(tool, side_effects=side_effects, untrusted_output=untrusted_output, summarize=summarize,
                         **extra)
