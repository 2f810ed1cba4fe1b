"""Repairs for what real (small, local) models send instead of a clean answer or tool call.

Seen with a 135M-parameter model behind llama.cpp's OpenAI-compatible server:
  - a streamed tool name repeated in every chunk, so the merged name reads "fs_list_dirfs_list_dir...";
  - a tool call written as JSON text in the content ("{"name": "fs_list_dir", "arguments": {...}}",
    inside a code fence or `<tool_call>` tags) instead of on the tool-call channel;
  - a tool call written as code: `fs_list_dir(path=".")` or `functions.fs_list_dir({"path": "."})` in a fence,
    or `fs_list_dir: {"path": "."}` (the built-in model's own call format) as the whole answer;
  - a plain prose answer wrapped in a lone code fence.

Each repair is narrow: a repeated name is repaired only when it is an exact repetition of a known tool name,
a JSON call is recovered only when the JSON is (nearly) all the content and names a known tool, a call written as
code only when every line of it is a call to a known tool with literal arguments (read by `ast`, never run). Anything else
is left as it is, so the executor's own errors (unknown tool, bad arguments) go back to the model. A recovered
call is an ordinary tool call: it passes the executor's argument validation and autonomy policy like any other.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import uuid
import warnings
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, ToolCall

from orchestrator.core import json_bounds

log = logging.getLogger(__name__)

_FENCE_RE = re.compile(r"^\s*```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)\n?[ \t]*```\s*$", re.S)
_ANY_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)
_TOOL_TAG_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)
_PROSE_FENCE_LANGS = {"", "text", "txt", "plaintext", "markdown", "md"}
# Prose around a recovered JSON call longer than this means the JSON was probably an example, not a call.
_MAX_SURROUNDING_PROSE = 200


@dataclass
class Repairs:
    """What was changed in one message, for logs, telemetry and the real-model benchmark."""

    notes: list[str] = field(default_factory=list)

    def add(self, note: str) -> None:
        log.info("model output repaired: %s", note)
        self.notes.append(note)

    def __bool__(self) -> bool:
        return bool(self.notes)


def repeated_name(name: str, known: Collection[str]) -> str | None:
    """The known tool name that `name` repeats exactly two or more times ("abab" -> "ab"), else None."""
    if not name or name in known:
        return None
    for tool in known:
        if tool and len(name) % len(tool) == 0 and len(name) > len(tool) and name == tool * (len(name) // len(tool)):
            return tool
    return None


def repeated_json_object(raw: str) -> dict[str, Any] | None:
    """Arguments streamed once per chunk, like the name: the same JSON object written n times in a row."""
    text = raw.strip()
    if not text.startswith("{") or json_bounds.too_deep(text):
        return None
    decoder = json.JSONDecoder()
    try:
        first, end = decoder.raw_decode(text)
    except ValueError:
        return None
    if not isinstance(first, dict):
        return None
    unit = text[:end]
    rest = text[end:].strip()
    while rest:
        if not rest.startswith(unit):
            return None
        rest = rest[len(unit):].strip()
    return first


def _as_args(value: Any) -> dict[str, Any] | None:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json_bounds.loads(value) if value.strip() else {}
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _call_from_json(obj: Any, known: Collection[str]) -> dict[str, Any] | None:
    """{"name", "arguments"|"parameters"|"args"}, {"tool"|"tool_name", ...} or {"function": {...}}."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):
        return _call_from_json(obj["function"], known)
    name = obj.get("name") or obj.get("tool") or obj.get("tool_name")
    if not isinstance(name, str) or name not in known:
        return None
    present = [k for k in ("arguments", "parameters", "args", "input") if k in obj]
    args = _as_args(obj[present[0]]) if present else {}
    if args is None:
        return None
    return {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}


def _calls_from_text(text: str, known: Collection[str]) -> list[dict[str, Any]] | None:
    """Every call in one JSON text (an object, or a list of objects); None unless all of them are calls."""
    try:
        obj = json_bounds.loads(text)
    except ValueError:
        return None
    items = obj if isinstance(obj, list) else [obj]
    calls = [_call_from_json(item, known) for item in items]
    found = [c for c in calls if c is not None]
    return found if found and len(found) == len(calls) else None


_NAMED_ARGS_RE = re.compile(r"^(?:functions\.)?([A-Za-z_][\w.-]*)\s*:\s*(\{.*\})\s*$", re.S)


def _call_from_expression(node: ast.expr, known: Collection[str]) -> dict[str, Any] | None:
    """`name(key=literal, ...)`, `name({...})` or `functions.name(...)` with `name` a known tool."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else getattr(func, "id", None)
    if name not in known:
        return None
    try:
        if node.args:
            if len(node.args) != 1 or node.keywords:
                return None
            args = ast.literal_eval(node.args[0])
        else:
            args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
            if len(args) != len(node.keywords):
                return None  # **kwargs
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(args, dict):
        return None
    return {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}


def _calls_from_code(text: str, known: Collection[str]) -> list[dict[str, Any]] | None:
    """Every call in a block of code (one call a line), or `name: {json}`; None unless all of it is calls."""
    named = _NAMED_ARGS_RE.match(text.strip())
    if named and named.group(1) in known:
        args = _as_args(named.group(2))
        if args is not None:
            return [{"name": named.group(1), "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}]
    if len(text) > 10_000 or "(" not in text:  # a call has its parentheses; plain words need no parse
        return None
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" in the model's text is its business, not a warning
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text.strip())
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    calls = [_call_from_expression(stmt.value, known) if isinstance(stmt, ast.Expr) else None for stmt in tree.body]
    found = [c for c in calls if c is not None]
    return found if found and len(found) == len(calls) else None


def _candidates(content: str) -> Iterable[tuple[str, str]]:
    """(json text, the content without it) for each place a model writes a call as text."""
    for m in _TOOL_TAG_RE.finditer(content):
        inner = m.group(1).strip()
        fenced = _FENCE_RE.match(inner)
        yield (fenced.group(2) if fenced else inner), content[: m.start()] + content[m.end():]
    for m in _ANY_FENCE_RE.finditer(content):
        yield m.group(2), content[: m.start()] + content[m.end():]
    stripped = content.strip()
    if not stripped.startswith(("{", "[", "```")):
        yield stripped, ""  # a call written as code, unfenced
    if stripped.startswith(("{", "[")) and not json_bounds.too_deep(stripped):
        yield stripped, ""
        # a JSON object followed by chatter ("{...} I will now list the folder.")
        try:
            _, end = json.JSONDecoder().raw_decode(stripped)
            yield stripped[:end], stripped[end:]
        except ValueError:
            pass


def recover_calls(content: str, known: Collection[str]) -> tuple[list[dict[str, Any]], str] | None:
    """Tool calls written as JSON in the content, and the prose left around them; None when there are none."""
    if not content or not known:
        return None
    for text, rest in _candidates(content):
        calls = _calls_from_text(text.strip(), known) or _calls_from_code(text, known)
        if calls and len(rest.strip()) <= _MAX_SURROUNDING_PROSE:
            return calls, rest.strip()
    return None


def strip_prose_fence(content: str) -> str | None:
    """The text inside a lone code fence with no language (or text/markdown), else None."""
    m = _FENCE_RE.match(content or "")
    if not m or m.group(1).lower() not in _PROSE_FENCE_LANGS:
        return None
    inner = m.group(2).strip()
    return inner or None


_RESTATED_CALL_RE = re.compile(r"^\W*functions?\.(\w+)\s*:")


def restates_call(text: str, calls: list[ToolCall]) -> bool:
    """Whether an answer written after tool results only restates the call that was made, instead of saying
    what came of it: the built-in 135M model, asked for words after a result, writes its call again
    ('{"path": "notes.txt"}' and a stray fence, or 'function.fs_read_text: {...}' and some rambling)."""
    names = {c.get("name") for c in calls}
    restated = _RESTATED_CALL_RE.match(text.strip())
    if restated and restated.group(1) in names:
        return True
    bare = re.sub(r"```[A-Za-z0-9_+-]*", "", text).strip().strip("()")
    if not bare.startswith("{"):
        return False
    try:
        written = json.loads(bare)
    except ValueError:
        return False
    # A whole call as Qwen writes it ({"name": ..., "arguments": {...}}) says nothing to the user, whichever tool it
    # names: Qwen2.5-Coder-0.5B, asked for words after its results, wrote a call to another tool.
    if isinstance(written, dict) and set(written) == {"name", "arguments"} and isinstance(written["arguments"], dict):
        return True
    return any(written == c.get("args") for c in calls)


def sanitize_message(message: AIMessage, known_tools: Collection[str]) -> tuple[AIMessage, Repairs]:
    """Apply the repairs above to a parsed model message; returns the message (new if changed) and notes."""
    repairs = Repairs()
    known = set(known_tools)
    calls: list[dict[str, Any]] = [dict(c) for c in message.tool_calls]
    invalid: list[dict[str, Any]] = [dict(c) for c in message.invalid_tool_calls]

    for call in calls:
        fixed = repeated_name(call.get("name") or "", known)
        if fixed:
            repairs.add(f"tool name {call['name'][:40]!r}... repeated {len(call['name']) // len(fixed)} times -> {fixed}")
            call["name"] = fixed
    still_invalid = []
    for bad in invalid:
        name = bad.get("name") or ""
        fixed = repeated_name(name, known) or (name if name in known else None)
        args = repeated_json_object(bad.get("args") or "") if fixed else None
        if fixed and args is not None:
            repairs.add(f"tool call {fixed} with its arguments repeated -> one call")
            calls.append({"name": fixed, "args": args, "id": bad.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                          "type": "tool_call"})
            continue
        if fixed and fixed != name:
            repairs.add(f"tool name repeated -> {fixed}")
            bad["name"] = fixed
        still_invalid.append(bad)
    invalid = still_invalid

    content = message.content
    if not calls and not invalid and isinstance(content, str):
        recovered = recover_calls(content, known)
        if recovered:
            found, rest = recovered
            repairs.add(f"tool call{'s' if len(found) > 1 else ''} written as text in the content -> "
                        + ", ".join(c["name"] for c in found))
            calls, content = found, rest
        else:
            inner = strip_prose_fence(content)
            if inner is not None:
                repairs.add("answer wrapped in a lone code fence -> fence removed")
                content = inner

    if not repairs:
        return message, repairs
    return AIMessage(
        content=content, id=message.id, tool_calls=calls, invalid_tool_calls=invalid,
        usage_metadata=message.usage_metadata, response_metadata=message.response_metadata,
        additional_kwargs={**message.additional_kwargs, "jarvis_repairs": repairs.notes},
    ), repairs
