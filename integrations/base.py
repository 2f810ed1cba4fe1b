"""The tool contract: every Jarvis tool, whatever made it (hand-written, MCP, generated, a jorb's, a mission's),
carries one typed `ToolMeta` that says what the executor, the policy and the views may rely on.

The meta lives in the LangChain tool's `metadata` dict under the single key `jarvis` (LangChain hands that dict
to callbacks; nothing else of Jarvis reads it). `tool_meta(tool)` is the one accessor: a tool without a ToolMeta,
or whose `metadata` holds any other key, raises ToolContractError. The catalog asks it for every tool a provider
gives and REFUSES a tool that fails (left out, logged, its error kept): a default would have to guess the tool's
effects, and no guess is closed (an undeclared effect runs as read-only, by itself). Refusing is.

Fail closed: a tool's output is content from outside the conversation (`untrusted_output`) unless the tool names
why it is not (`trusted_output="the user's own reminders"`); a tool that forgets says nothing, and its output
taints the thread. tests/test_tool_contract.py lists every trusted output of the default catalog with its reason.

A field changes with `with_meta(tool, field=value)` (dataclasses.replace), never by mutating a dict.

This module imports nothing from `orchestrator`; the executor reads the contract through these functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel

from .effects import KNOWN_SIDE_EFFECTS  # noqa: F401 - re-exported: the tools and the views name effects from here

ToolT = TypeVar("ToolT", bound=BaseTool)  # the contract is set on a tool of any kind, which stays that kind


class ToolError(Exception):
    """A tool failed for a reason the user can act on; the message is shown as the tool's result. `server_text`:
    the failing server's own words, whole (a browser's error names the page it shows, read by tools/site_grants)."""

    def __init__(self, *args: object, server_text: str | None = None):
        super().__init__(*args)
        self.server_text = server_text


Args = dict[str, Any]
# The key of `BaseTool.metadata` that holds the ToolMeta; no other key is allowed there.
META_KEY = "jarvis"


class ToolContractError(TypeError):
    """A tool that breaks the contract: no ToolMeta, metadata outside it, or a field of the wrong type."""


@dataclass(frozen=True)
class ToolMeta:
    """What a tool declares. Every field has the closed default but `trusted_output`, which is closed when empty.

    source              "static", "mcp", "generated", "meta" (the graph's own: find_tools, create_new_tool)...
    side_effects        effect names (empty: read-only); `side_effects_for(args)` judges one call where they depend
                        on its arguments (sending by email or by Telegram)
    trusted_output      why the result is not outside content ("" : it is: files, email, web, another person's
                        words); a tool trusted in general returns a FromOutside string the times it is not
    sends_out           can carry data off the machine though it declares no effect (an open-world fetch)
    summarize           callable(args) -> one plain sentence of what the call will do, for confirmations
    requires_confirmation  a reason, or callable(args) -> a reason or None: this call asks whatever the policy
    deciding_args       the arguments that choose where an effect goes or what it touches (tools/provenance.py);
                        None: provenance cannot judge the tool and the blanket rule applies
    opaque_args         deciding ids, trusted only from a trusted tool's result, never from the user's prose
    sensitive_output    the result is the user's private records (provenance keeps their numbers from leaving)
    editable            False: a confirmation is approve or deny only (the code shown is the code tested)
    site_scope          a browser tool's tools/site_grants.SiteScope
    not_for_scripts     hidden from jorb scripts' namespace
    normalize           callable(path) -> the path as the tool resolves it (a mission's workspace tools)
    fix_args            callable(args, now) -> the arguments with what depends on the moment fixed at `now` (words
                        for a time as the instant they mean), before the call is judged, asked about and run; `now`
                        is when the call was first asked about, so what the user approves is what runs, however
                        late the answer comes
    unavailable         callable() -> why the tool cannot work now (not signed in), or None; while it says why, the
                        tool is not offered to the model (integrations/availability.py); the views show it
    server, mcp_name    the MCP server and its own name for the tool; `wrapper`: a typed tool built over one
    examples            example calls, indexed for find_tools
    shown               facts only displayed (a generated tool's version, trust, test report)
    """

    source: str = "static"
    side_effects: tuple[str, ...] = ()
    side_effects_for: Callable[[Args], Iterable[str]] | None = None
    trusted_output: str = ""
    sends_out: bool = False
    summarize: Callable[[Args], str] | None = None
    requires_confirmation: str | Callable[[Args], str | None] | None = None
    deciding_args: tuple[str, ...] | None = None
    opaque_args: tuple[str, ...] = ()
    sensitive_output: bool = False
    editable: bool = True
    site_scope: Any = None
    not_for_scripts: bool = False
    normalize: Callable[[str], str] | None = None
    fix_args: Callable[[Args, datetime], Args] | None = None
    unavailable: Callable[[], str | None] | None = None
    server: str | None = None
    mcp_name: str | None = None
    wrapper: bool = False
    examples: tuple[str, ...] = ()
    shown: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("side_effects", "opaque_args", "examples", "deciding_args"):
            value = getattr(self, name)
            if value is None and name == "deciding_args":
                continue
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ToolContractError(f"ToolMeta.{name} must be a list of names, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not isinstance(self.trusted_output, str):
            raise ToolContractError("ToolMeta.trusted_output is the reason the output is trusted (a sentence), "
                                    f"got {self.trusted_output!r}")
        for name in ("side_effects_for", "summarize", "normalize", "fix_args", "unavailable"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise ToolContractError(f"ToolMeta.{name} must be callable")
        object.__setattr__(self, "shown", dict(self.shown))

    @property
    def untrusted_output(self) -> bool:
        return not self.trusted_output


_FIELDS = frozenset(f.name for f in dataclasses.fields(ToolMeta))


def tool_meta(tool: BaseTool) -> ToolMeta:
    """The tool's contract; ToolContractError when it has none or carries metadata outside it."""
    metadata = getattr(tool, "metadata", None)
    if not isinstance(metadata, dict):
        metadata = {}
    meta = metadata.get(META_KEY)
    name = getattr(tool, "name", tool)
    if not isinstance(meta, ToolMeta):
        raise ToolContractError(f"the tool {name!r} declares no ToolMeta (integrations/base.py): build it with "
                                "make_tool or set_tool_meta")
    if len(metadata) != 1:
        extra = sorted(k for k in metadata if k != META_KEY)
        raise ToolContractError(f"the tool {name!r} carries metadata outside its ToolMeta: {', '.join(extra)}")
    return meta


def set_tool_meta(tool: ToolT, **fields: Any) -> ToolT:
    """Give `tool` its contract, replacing whatever metadata it had (an MCP adapter's annotations are the server's
    words, not Jarvis's). An unknown field is refused."""
    unknown = sorted(set(fields) - _FIELDS)
    if unknown:
        raise ToolContractError(f"unknown tool metadata for {getattr(tool, 'name', tool)!r}: {', '.join(unknown)} "
                                "(the contract is integrations/base.ToolMeta)")
    tool.metadata = {META_KEY: ToolMeta(**fields)}
    return tool


def with_meta(tool: ToolT, **changes: Any) -> ToolT:
    """The tool with some fields of its contract changed (a provider adding what only it knows)."""
    unknown = sorted(set(changes) - _FIELDS)
    if unknown:
        raise ToolContractError(f"unknown tool metadata for {tool.name!r}: {', '.join(unknown)}")
    tool.metadata = {META_KEY: dataclasses.replace(tool_meta(tool), **changes)}
    return tool


def side_effects_of(tool: BaseTool, args: Args | None = None) -> list[str]:
    """The tool's side effects; a tool whose effects depend on its arguments (sending by email or by
    Telegram) carries `side_effects_for(args)` and is judged per call."""
    meta = tool_meta(tool)
    if args is not None and meta.side_effects_for is not None:
        return list(meta.side_effects_for(args))
    return list(meta.side_effects)


def confirmation_demand(tool: BaseTool, args: Args) -> str | None:
    """Why this call must be confirmed whatever the autonomy policy says, or None: `requires_confirmation`,
    a reason, or a callable(args) giving one for the calls that need it (a jorb granted autonomy)."""
    demand = tool_meta(tool).requires_confirmation
    return demand(args) if callable(demand) else demand


# Effects that carry data off this machine: after untrusted content, a call that can do this is escalated.
SENDS_OUT_EFFECTS = frozenset({"network", "email_send", "message_send"})


def sends_out(tool: BaseTool, effects: Iterable[str] = ()) -> bool:
    """Whether a call can carry data off this machine: a declared sending effect, or a tool that reaches the open
    world though it changes nothing (an MCP fetch annotated read-only: `sends_out`)."""
    return tool_meta(tool).sends_out or bool(SENDS_OUT_EFFECTS & set(effects))


class FromOutside(str):
    """A result of a tool whose output is the user's own (`trusted_output`) that this time holds text from
    outside the conversation (a reminder an agent program wrote): the call counts as reading outside content."""


def is_untrusted(tool: BaseTool, result: Any = None) -> bool:
    return tool_meta(tool).untrusted_output or isinstance(result, FromOutside)


def source_of(tool: BaseTool) -> str:
    return tool_meta(tool).source


def summarize_call(tool: BaseTool, args: dict[str, Any]) -> str:
    """One plain sentence of what the call will do, for confirmations."""
    summarize = tool_meta(tool).summarize
    if summarize is not None:
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


def make_tool(
    func: Callable[..., Any],
    *,
    args_schema: type[BaseModel],
    name: str | None = None,
    description: str | None = None,
    coroutine: Callable[..., Any] | None = None,
    **meta: Any,
) -> StructuredTool:
    """A StructuredTool with its ToolMeta (`meta`: the contract's fields). The docstring (or description) is what
    the model reads."""
    tool = StructuredTool.from_function(
        func=func,
        coroutine=coroutine,
        name=name or func.__name__,
        description=(description or func.__doc__ or "").strip(),
        args_schema=args_schema,
        infer_schema=False,
    )
    return set_tool_meta(tool, **meta)
