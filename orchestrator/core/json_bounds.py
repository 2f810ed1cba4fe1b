"""JSON nested too deep is refused before it is parsed.

Python's json parser recurses once per level: `[[[[...]]]]` 100,000 deep raises RecursionError (not ValueError,
so the callers' `except ValueError` let it through as a traceback), and a few hundred levels that do parse still
break what recurses over the value afterwards (schema checks, the checkpointer). Nothing Jarvis takes as JSON
(API bodies, a model's tool-call arguments, a jorb's step) needs more than a few levels, so more than
`MAX_DEPTH` is refused with a sentence saying so. The scan is one regular expression (strings are skipped
whole, so brackets inside them do not count) and never recurses.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64

_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
_OPEN = frozenset(b"[{")


def too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the brackets of a JSON text nest deeper than `limit` (the scan stops as soon as they do)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return False  # too few brackets to go over: no scan
    depth = 0
    for match in _TOKENS.finditer(data):
        first = match.group()[0]
        if first == 0x22:  # a string: its brackets are text
            continue
        if first in _OPEN:
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


class TooDeep(ValueError):
    """JSON nested deeper than allowed (a ValueError, so callers that refuse bad JSON refuse it too)."""

    def __init__(self, limit: int):
        super().__init__(f"it is nested more than {limit} levels deep")
        self.limit = limit


def check_depth(text: str | bytes, limit: int = MAX_DEPTH) -> None:
    if too_deep(text, limit):
        raise TooDeep(limit)


def loads(text: str | bytes, limit: int = MAX_DEPTH) -> Any:
    """json.loads, refusing (TooDeep, a ValueError) a text nested deeper than `limit` before parsing it."""
    check_depth(text, limit)
    return json.loads(text)
