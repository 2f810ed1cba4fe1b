"""Bounds on the tool calls of one model answer (chat/graph.py's route): how many of them run, and how each one
is counted against the turn's side-effect budget.

- An answer may ask for any number of calls; past `planner.max_tool_calls_per_answer` the rest are not run, and
  each one's result tells the model so (every call of an answer must be answered).
- The calls of one answer run side by side, each judged by the autonomy policy against the turn's count of side
  effects (autonomy.max_side_effects_per_turn). Counted as it was before the answer, an answer of fifty writes
  all ran on auto under a budget of 20. So each call is counted as it is decided, in the answer's order: the
  calls past the budget ask. A call that may have side effects is counted whether or not it then runs (asked,
  denied, failed): the count errs on the side of asking.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from integrations.base import side_effects_of
from orchestrator.core.config import Settings
from .state import TurnCount


def over_the_cap(settings: Settings, index: int) -> str | None:
    """The result of the answer's `index`th call (from 0) when it is past the cap, else None."""
    cap = settings.planner.max_tool_calls_per_answer
    if index < cap:
        return None
    return (f"Error: not run: one answer may call at most {cap} tools (planner.max_tool_calls_per_answer), and "
            f"this was call {index + 1}. Call it again in a later step if it is still needed.")


def effects_before_each(catalog: Any, calls: Sequence[Mapping[str, Any]], effects: TurnCount,
                        turn: int) -> list[TurnCount]:
    """For each call of one answer, the turn's side effects as the policy must see them when judging it: those run
    before the answer plus the answer's earlier calls that may have side effects."""
    count = effects.count if effects.turn == turn else 0
    out = []
    for call in calls:
        out.append(TurnCount(turn=turn, count=count))
        tool = catalog.get(call.get("name") or "")
        args = call.get("args")
        if tool is not None and side_effects_of(tool, args if isinstance(args, dict) else None):
            count += 1
    return out
