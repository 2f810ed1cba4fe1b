"""A tool's schema as a model is sent it: what the model needs to choose and call the tool, nothing else.

Tool schemas are almost all of the planner's prompt (about 2,250 tokens with 10 tools bound, the system text a
few hundred), and a local model reads them again on every call. What pydantic writes for people and for
validation costs tokens and tells the model nothing it uses:
- descriptions are wrapped and indented like the docstrings they come from: blanks collapsed;
- a description's later sentences are mostly for people (how the tool works inside, what it says on errors);
  the first is kept, and a later one only when it names another tool (`use yt_summarize for those`, `read one
  with gmail_get_thread`), which is how the model learns to chain tools;
- an optional argument is `anyOf: [X, {type: null}]` with `default: null`: it is X, optional because it is not
  in `required` (the tool applies its own default; the executor validates against the tool's full schema, so
  nothing the model sends is checked against this copy alone);
- defaults are the tool's business, not the model's: dropped;
- an argument's description is cut to its first clause (before "; "), and dropped when it only repeats its
  name and the tool's name ("the thread to reply to" for thread_id of gmail_draft_reply); any word beyond them
  (a format, an example, where the value comes from) keeps it.
Types, enums, bounds and `required` stay: the built-in model's calls are constrained by them (llama_handler.py).
"""

from __future__ import annotations

import re
from typing import Any

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
_ABBREVIATION = re.compile(r"(?:^|[\s(])[A-Za-z]{1,2}\.$|\b(?:e\.g|i\.e|etc)\.$")  # "(p. N)", "e.g. X": no end
_WORD = re.compile(r"[a-z0-9]+")
_FILLER = {"the", "a", "an", "of", "to", "for", "this", "that", "its", "it", "in", "on", "by", "with", "as", "or",
           "and", "is", "be", "one", "any", "which", "from"}
_IDENTIFIER = re.compile(r"\b[a-z][a-z0-9]*_[a-z0-9_]+\b")  # snake_case: an argument or a tool named in the text


def compact_text(text: str) -> str:
    return " ".join((text or "").split())


def compact_description(description: str, arguments: set[str]) -> str:
    """The first sentence, and each later one that names an argument or a tool (see the module's docstring)."""
    sentences: list[str] = []
    for part in _SENTENCE_END.split(compact_text(description)):
        if sentences and _ABBREVIATION.search(sentences[-1]):
            sentences[-1] += " " + part
        else:
            sentences.append(part)
    kept = sentences[:1]
    for sentence in sentences[1:]:
        if set(_IDENTIFIER.findall(sentence)) - arguments:  # names another tool (or a value to pass it)
            kept.append(sentence)
    return " ".join(kept)


def _stems(text: str) -> set[str]:
    return {w[:4] for w in _WORD.findall(text.lower().replace("_", " ")) if w not in _FILLER}


def _compact_property(spec: Any, said: set[str]) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = {k: v for k, v in spec.items() if k not in ("default", "title")}
    options = out.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(kept) == 1 and isinstance(kept[0], dict):  # X or null, and null is what leaving it out means
            del out["anyOf"]
            out = {**_compact_property(kept[0], set()), **out}
        else:
            out["anyOf"] = [_compact_property(o, set()) for o in kept]
    if isinstance(out.get("items"), dict):
        out["items"] = _compact_property(out["items"], set())
    if "description" in out:
        # the first clause: what follows a ";" is a detail of how the tool treats the value
        text = compact_text(str(out["description"])).split("; ", 1)[0]
        if not text or _stems(text) <= said:
            del out["description"]
        else:
            out["description"] = text
    return out


def compact_tool(schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool schema ({"type": "function", "function": {...}}) made compact; anything else unchanged."""
    fn = schema.get("function") if isinstance(schema, dict) else None
    if not isinstance(fn, dict):
        return schema
    params = fn.get("parameters")
    properties = (params or {}).get("properties") if isinstance(params, dict) else None
    out_fn = {k: v for k, v in fn.items() if k not in ("description", "parameters")}
    names = set(properties) if isinstance(properties, dict) else set()
    if fn.get("description"):
        out_fn["description"] = compact_description(str(fn["description"]), names)
    if isinstance(params, dict):
        new_params = {k: v for k, v in params.items() if k not in ("title", "description")}
        if isinstance(properties, dict):
            tool_words = _stems(str(fn.get("name", "")))
            new_params["properties"] = {name: _compact_property(spec, tool_words | _stems(name))
                                        for name, spec in properties.items()}
        out_fn["parameters"] = new_params
    return {**schema, "function": out_fn}


# The built-in model's function list (llm/llama_handler.py) describes each tool in one line, by these.
def first_sentence(description: str) -> str:
    """The description's first sentence: every tool's list line is read again on each turn it is bound, and a
    docstring's first line may stop mid-sentence where the text was wrapped."""
    paragraph = " ".join(description.strip().split("\n\n", 1)[0].split())
    return _FIRST_SENTENCE_END.split(paragraph, 1)[0]


_FIRST_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def describe_line(tool: dict[str, Any]) -> str:
    fn = tool.get("function") or {}
    summary = first_sentence(fn.get("description") or "")
    params = fn.get("parameters") or {}
    required = set(params.get("required") or [])
    args = []
    for name, spec in (params.get("properties") or {}).items():
        kind = spec.get("type") or "/".join(s.get("type", "?") for s in spec.get("anyOf", []) if s.get("type") != "null")
        if name in required:
            hint = f": {spec['description']}" if spec.get("description") else ""
            args.append(f'"{name}" ({kind}){hint}')
        else:  # named and typed only: the list is read on every turn it is bound, and these may be left out
            args.append(f'"{name}" ({kind}, optional)')
    return summary + (f" Arguments: {'; '.join(args)}." if args else " No arguments: {}.")
