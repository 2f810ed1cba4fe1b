"""Shared pieces of the JARB tests: a spec, model replies, and rules that make the scripted server play
the code-writing model (recognised by JARB's system prompts)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jarb_core.generator import CODE_SYSTEM, REPAIR_SYSTEM, TESTS_SYSTEM

WORD_COUNT_SPEC: dict[str, Any] = {
    "name": "word_count",
    "description": "Count the words in a text (runs of characters between whitespace).",
    "args": [{"name": "text", "type": "str", "description": "the text to count"}],
    "return_type": "int",
    "side_effects": [],
    "examples": ["word_count('a b c') -> 3", "word_count('') -> 0"],
}

BUGGY_WORD_COUNT = '''def word_count(text: str) -> int:
    """Count words."""
    return len(text.split(" "))
'''

FIXED_WORD_COUNT = '''def word_count(text: str) -> int:
    """Count the words in text."""
    return len(text.split())
'''

WORD_COUNT_TESTS = '''from word_count import word_count


def test_example():
    assert word_count("a b c") == 3


def test_empty():
    assert word_count("") == 0


def test_extra_spaces():
    assert word_count("  one   two ") == 2
'''


def fenced(code: str, prose: bool = True) -> dict[str, Any]:
    """A model reply holding code, with prose around it (the extractor must cope)."""
    text = f"```python\n{code}```"
    if prose:
        text = "Here is the module you asked for:\n\n" + text + "\n\nIt uses only the standard library."
    return {"content": text}


def _system(request: dict) -> str:
    messages = request.get("messages") or []
    return str(messages[0].get("content") or "") if messages and messages[0].get("role") == "system" else ""


def is_code_request(request: dict) -> bool:
    return _system(request).startswith(CODE_SYSTEM.split("{")[0])


def is_tests_request(request: dict) -> bool:
    return _system(request).startswith(TESTS_SYSTEM.split("{")[0])


def is_repair_request(request: dict) -> bool:
    return _system(request).startswith(REPAIR_SYSTEM.split("{")[0])


def is_jarb_request(request: dict) -> bool:
    return is_code_request(request) or is_tests_request(request) or is_repair_request(request)


def play_jarb(server, *, code: str | list[str], tests: str, repairs: list[str] | None = None) -> dict[str, list]:
    """Answer JARB's prompts: `code` for the first module (a list: one per request), `tests`, then each repair
    request with the next of `repairs` (the last one repeats). Returns the requests seen, per kind."""
    seen: dict[str, list] = {"code": [], "tests": [], "repair": []}
    codes = list(code) if isinstance(code, list) else [code]
    fixes = list(repairs or [])

    def answer(kind: str, pool: list[str]) -> Callable[[dict], dict]:
        def respond(request: dict) -> dict:
            seen[kind].append(request)
            item = pool[min(len(seen[kind]) - 1, len(pool) - 1)] if pool else ""
            return fenced(item)
        return respond

    server.add_rule(is_code_request, answer("code", codes))
    server.add_rule(is_tests_request, answer("tests", [tests]))
    server.add_rule(is_repair_request, answer("repair", fixes or codes))
    return seen


def spec_call(spec: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "create_new_tool", "arguments": {"spec": spec}}]}


def tool_messages(request: dict, name: str | None = None) -> list[str]:
    return [m.get("content") or "" for m in request.get("messages") or []
            if m.get("role") == "tool" and (name is None or m.get("name") in (name, None))]


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str)
