"""The `jarvis` capability namespace of jorb scripts, derived from the executor's tool catalog.

Static tools split at their first underscore (`fs_list_dir` -> `jarvis.fs.list_dir`, `android_task_do` ->
`jarvis.android.task_do`, `messages_send` -> `jarvis.messages.send`); generated tools live under
`jarvis.tools.<name>` and MCP tools under `jarvis.mcp.<name>`. `jarvis.call("tool_name", ...)` reaches any tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

from integrations.base import side_effects_of, source_of, tool_meta


@dataclass(frozen=True)
class Capability:
    namespace: str
    method: str
    tool: BaseTool

    @property
    def dotted(self) -> str:
        return f"jarvis.{self.namespace}.{self.method}"


def capability_of(tool: BaseTool) -> Capability:
    source = source_of(tool)
    if source == "generated":
        return Capability("tools", tool.name, tool)
    if source == "mcp":
        return Capability("mcp", tool.name, tool)
    ns, _, method = tool.name.partition("_")
    if not method:
        return Capability("tools", tool.name, tool)
    return Capability(ns, method, tool)


def arg_names(tool: BaseTool) -> list[str]:
    schema = tool.args_schema
    if isinstance(schema, dict):
        return list((schema.get("properties") or {}).keys())
    if schema is not None and hasattr(schema, "model_fields"):
        return list(schema.model_fields)
    return list(tool.args)


def bind_arguments(tool: BaseTool, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Positional arguments of a script call, matched to the tool's arguments in schema order."""
    names = arg_names(tool)
    if len(args) > len(names):
        raise TypeError(f"{tool.name} takes at most {len(names)} positional arguments ({', '.join(names)}), got {len(args)}")
    bound = dict(zip(names, args))
    for key in kwargs:
        if key in bound:
            raise TypeError(f"{tool.name} got two values for argument {key!r}")
    bound.update(kwargs)
    return bound


def _signature(tool: BaseTool) -> str:
    schema = tool.args_schema
    parts = []
    if isinstance(schema, dict):
        required = set(schema.get("required") or [])
        for name in schema.get("properties") or {}:
            parts.append(name if name in required else f"{name}=...")
    elif schema is not None and hasattr(schema, "model_fields"):
        for name, field in schema.model_fields.items():
            parts.append(name if field.is_required() else f"{name}={field.default!r}")
    return ", ".join(parts)


def _first_sentence(text: str) -> str:
    line = " ".join((text or "").split())
    cut = line.find(". ")
    return line[: cut + 1] if 0 < cut < 200 else line[:200]


class Namespace:
    """The capabilities a jorb may call (all tools, or the jorb's restricted context)."""

    def __init__(self, tools: list[BaseTool], allowed: list[str] | None = None):
        caps = [capability_of(t) for t in tools if not tool_meta(t).not_for_scripts]
        if allowed is not None:
            allowed_set = set(allowed)
            caps = [c for c in caps if c.tool.name in allowed_set or c.namespace in allowed_set or c.dotted in allowed_set]
        self.caps = caps
        self.by_dotted = {(c.namespace, c.method): c for c in caps}
        self.by_tool = {c.tool.name: c for c in caps}

    @property
    def tool_names(self) -> frozenset[str]:
        return frozenset(self.by_tool)

    def resolve(self, namespace: str, method: str) -> Capability | None:
        if namespace == "call":
            return self.by_tool.get(method)
        return self.by_dotted.get((namespace, method))

    def describe(self) -> str:
        """The capability list for the prompt, grouped by namespace."""
        lines: list[str] = []
        current = None
        for cap in sorted(self.caps, key=lambda c: (c.namespace, c.method)):
            if cap.namespace != current:
                current = cap.namespace
                lines.append(f"\n### jarvis.{current}")
            effects = side_effects_of(cap.tool)
            note = f" [side effects: {', '.join(effects)}; may need the user's confirmation]" if effects else ""
            lines.append(f"- {cap.dotted}({_signature(cap.tool)}) - {_first_sentence(cap.tool.description)}{note}")
        return "\n".join(lines).strip()
