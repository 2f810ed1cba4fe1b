"""Did the user ask Jarvis to remember (or forget) something in this turn?

`memory_write` is automatic because what it keeps is the user's own words. A weak model breaks that: asked "who is
my dentist?", the built-in 135M model called memory_remember and kept a junk fact without asking. So a memory write
runs by itself only in a turn whose user message asks for one: "remember that...", "note that...", "don't
forget...", "forget my...", or a yes to Jarvis's own offer ("Shall I remember that...?" "Yes please"). Any other
turn's memory write asks first (tools/autonomy.py `decide`, input `memory_asked`). A question that mentions
remembering ("do you remember my dentist?") is not a request to write.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from orchestrator.llm.context_block import own_words

# "remember"/"forget" as a request, not in a question about what Jarvis knows ("do you remember...?")
_ASKS = re.compile(
    r"\b(?:remember|memori[sz]e|forget)\b(?!\s+(?:when|how|what|who|where|if|whether)\b)"
    r"|\bnote (?:that|this|down)\b|\bmake a note\b|\btake note\b|\bkeep in mind\b|\b(?:don't|do not) forget\b"
    r"|\b(?:save|store|keep) (?:this|that|it) (?:in (?:your )?memory|for later)\b|\bwrite (?:this|that|it) down\b"
    r"|\bupdate (?:your |the )?memory\b",
    re.I)
_QUESTION_OF_MEMORY = re.compile(r"^\s*(?:do|did|can|could|would|will|what|who|where|when|how)\b[^.!]*\?\s*$", re.I)
_OFFER = re.compile(r"\b(?:remember|note|keep|save|forget)\b[^?]*\?", re.I)
_YES = re.compile(r"^\s*(?:yes|yeah|yep|yup|sure|ok(?:ay)?|please(?: do)?|do it|go ahead|correct|right|absolutely|of course)"
                  r"\b[\s\w,.!']*$", re.I)


def asks_to_remember(text: str) -> bool:
    """Whether a user message asks Jarvis to remember, note or forget something (not a question about memory)."""
    if not text or not _ASKS.search(text):
        return False
    if _QUESTION_OF_MEMORY.match(text) and not re.search(r"\b(?:can|could|would|will) you\b", text, re.I):
        return False  # "do you remember who my dentist is?" asks what Jarvis knows
    return True


def _text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def turn_asks_to_remember(messages: Sequence[Any]) -> bool | None:
    """For the turn ending `messages`: whether its user message asks to remember (or says yes to Jarvis offering
    to); None when there is no user message to judge (a jorb's or mission's own steps)."""
    human_at = next((i for i in range(len(messages) - 1, -1, -1) if getattr(messages[i], "type", "") == "human"), None)
    if human_at is None:
        return None
    said = own_words(_text(messages[human_at]))  # the user's words, not the memory block Jarvis adds after them
    if asks_to_remember(said):
        return True
    before = next((m for m in reversed(messages[:human_at]) if getattr(m, "type", "") == "ai"), None)
    offered = before is not None and not getattr(before, "tool_calls", None) and _OFFER.search(_text(before))
    return bool(offered and _YES.match(said))
