"""A turn's events as types: one dataclass per kind, one union (`TurnEvent`), and one conversion each way between
them and the wire dicts (`{"event": kind, ...}`) the web UI, the SSE stream, the MCP offer and the channels read.

The producers that cannot import the orchestrator (jarb_core's progress, the executor's stream writer, the model
client's "waiting" notes) write wire dicts; `from_wire` types them, `to_wire` gives back the same dict, key for key,
so the wire format is exactly what it was. A consumer dispatches on the type (`isinstance`, `match`), never on the
spelling of a string. Keys an event carries beyond its fields (a progress stage's details, a confirmation's
payload, the server's `html` on a done) travel in `extra`, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class _Event:
    kind: ClassVar[str] = ""
    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True)


@dataclass(frozen=True)
class Token(_Event):
    """A piece of the planner's answer, as the model streams it."""

    kind: ClassVar[str] = "token"
    text: str


@dataclass(frozen=True)
class ToolCall(_Event):
    """The planner asked for a tool."""

    kind: ClassVar[str] = "tool_call"
    tool: str
    args: Any
    id: str | None


@dataclass(frozen=True)
class ToolStart(_Event):
    """The executor starts running a tool (its `key`: the call's ledger key)."""

    kind: ClassVar[str] = "tool_start"
    tool: str
    args: Any
    key: str | None


@dataclass(frozen=True)
class ToolEnd(_Event):
    kind: ClassVar[str] = "tool_end"
    tool: str
    ok: bool
    duration_ms: float
    preview: str
    key: str | None


@dataclass(frozen=True)
class Progress(_Event):
    """Long work (JARB stages, waiting for the model, indexing): its details are in `extra`."""

    kind: ClassVar[str] = "progress"
    stage: str

    @property
    def message(self) -> str:
        return str(self.extra.get("message") or "")


@dataclass(frozen=True)
class Confirmation(_Event):
    """The turn waits for the user's decision; `extra` is what the confirmation shows (with its `ref`)."""

    kind: ClassVar[str] = "confirmation"
    interrupt_id: str
    thread_id: str


@dataclass(frozen=True)
class Done(_Event):
    """The final answer."""

    kind: ClassVar[str] = "done"
    content: str
    message_id: str | None


@dataclass(frozen=True)
class Stopped(_Event):
    """The user stopped the turn (then no Done): what was said so far, with the note."""

    kind: ClassVar[str] = "stopped"
    content: str
    message_id: str | None


@dataclass(frozen=True)
class Error(_Event):
    """The turn failed; the thread is intact. `failure`: model_endpoint, disk_full or internal."""

    kind: ClassVar[str] = "error"
    message: str
    failure: str = "internal"

    wire_names: ClassVar[dict[str, str]] = {"failure": "kind"}


@dataclass(frozen=True)
class Other(_Event):
    """A kind no consumer knows (a newer producer's): passed on as it came."""

    name: str


TurnEvent = Token | ToolCall | ToolStart | ToolEnd | Progress | Confirmation | Done | Stopped | Error | Other

KINDS: dict[str, type[_Event]] = {cls.kind: cls for cls in (Token, ToolCall, ToolStart, ToolEnd, Progress,
                                                              Confirmation, Done, Stopped, Error)}


def _wire_name(cls: type[_Event], name: str) -> str:
    return getattr(cls, "wire_names", {}).get(name, name)


def to_wire(event: TurnEvent) -> dict[str, Any]:
    """The dict the UI, SSE and the channels read: `{"event": kind, <fields>, <extra>}`."""
    if isinstance(event, Other):
        return {"event": event.name, **event.extra}
    cls = type(event)
    wire: dict[str, Any] = {"event": cls.kind}
    for f in fields(event):
        if f.name != "extra":
            wire[_wire_name(cls, f.name)] = getattr(event, f.name)
    wire.update(event.extra)
    return wire


def from_wire(wire: Mapping[str, Any]) -> TurnEvent:
    """The typed event of a wire dict (an unknown kind, or one lacking a field, is an Other)."""
    kind = str(wire.get("event") or "")
    cls = KINDS.get(kind)
    rest = {k: v for k, v in wire.items() if k != "event"}
    if cls is None:
        return Other(name=kind, extra=rest)
    given: dict[str, Any] = {}
    for f in fields(cls):
        if f.name == "extra":
            continue
        name = _wire_name(cls, f.name)
        if name in rest:
            given[f.name] = rest.pop(name)
    try:
        event: Any = cls(**given, extra=rest)
    except TypeError:  # a field missing: passed on as it came, never dropped and never guessed
        return Other(name=kind, extra={k: v for k, v in wire.items() if k != "event"})
    return event
