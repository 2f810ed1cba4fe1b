"""Keeping the planner's prompt under a token budget however long the thread.

When the system prompt and the messages since the last summary exceed `planner.history_token_budget`, the oldest
whole turns are folded into a running summary (one model call), until the rest fits in half the budget, so
that compaction happens now and then rather than every turn. The summary lives in the state; the raw messages
stay in the checkpoint, readable with `jarvis threads show`. Cuts fall only at the start of a user turn, so
a tool call is never separated from its result.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

log = logging.getLogger(__name__)

INTERNAL_TAG = "jarvis:internal"  # model calls whose tokens are not the answer (the UI and CLI skip them)

SUMMARY_PROMPT = """You keep the memory of a long conversation between a user and their assistant, Jarvis.
Rewrite the summary so that it includes the new messages below. Keep every fact the user may ask about later:
names, numbers, dates, decisions, preferences, file names, what was done and what is pending. Be concise; plain
sentences or bullet points; no preamble."""


def estimate_tokens(messages: list[Any]) -> int:
    return count_tokens_approximately(messages) if messages else 0


def _turn_starts(messages: list[AnyMessage], start: int) -> list[int]:
    return [i for i in range(start, len(messages)) if isinstance(messages[i], HumanMessage)]


def plan_cut(messages: list[AnyMessage], start: int, system_tokens: int, budget: int) -> int | None:
    """The index up to which messages should be summarized, or None when everything fits."""
    if system_tokens + estimate_tokens(messages[start:]) <= budget:
        return None
    starts = _turn_starts(messages, start)
    if len(starts) < 2:
        return None  # only the current turn is left: nothing can be folded without splitting it
    target = budget // 2
    cut = starts[-1]  # at most: everything before the current turn
    for s in starts[1:]:
        if system_tokens + estimate_tokens(messages[s:]) <= target:
            cut = s
            break
    return cut if cut > start else None


def _render(messages: list[AnyMessage]) -> str:
    lines = []
    for m in messages:
        text = m.text if hasattr(m, "text") else str(m.content)
        if m.type == "ai" and getattr(m, "tool_calls", None):
            calls = ", ".join(f"{c['name']}({c['args']})" for c in m.tool_calls)
            text = f"{text} [called {calls}]".strip()
        if m.type == "tool":
            text = f"[{getattr(m, 'name', 'tool')} result] {text[:1500]}"
        lines.append(f"{m.type}: {text}")
    return "\n".join(lines)


def summarize(llm: BaseChatModel, previous: str | None, messages: list[AnyMessage], config: dict | None) -> str:
    prompt = [
        SystemMessage(content=SUMMARY_PROMPT),
        HumanMessage(content=f"Current summary:\n{previous or '(none yet)'}\n\nNew messages:\n{_render(messages)}"),
    ]
    cfg = dict(config or {})
    cfg["tags"] = [*(cfg.get("tags") or []), INTERNAL_TAG]
    reply = llm.invoke(prompt, config=cfg)
    text = reply.text if hasattr(reply, "text") else str(reply.content)
    return text.strip() or (previous or "")


def compact(llm: BaseChatModel, state: Any, system_tokens: int, budget: int, config: dict | None) -> dict[str, Any]:
    """The state update that folds old turns into the summary, or {} when the prompt fits."""
    cut = plan_cut(state.messages, state.summarized_count, system_tokens, budget)
    if cut is None:
        return {}
    log.info("summarizing messages %d..%d of a long thread", state.summarized_count, cut)
    summary = summarize(llm, state.summary, state.messages[state.summarized_count:cut], config)
    return {"summary": summary, "summarized_count": cut}
