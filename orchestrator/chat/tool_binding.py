"""Which tools a thread's planner is bound to: the same from turn to turn, fitted to the model's window ([25]).

A model server reuses the prompt it evaluated last only up to the first token that differs (llama.cpp, Ollama,
vLLM's prefix cache), and the tools come before the conversation. When each request bound its own best matches, the
list changed every turn and every turn read the list and the conversation after it again (bench/prompt.py on the
built-in model: 58% of a turn's prompt found cached at worst, 75% on average). So in a thread, tools once bound stay
bound, in the order they were first bound, and a request's new best matches are appended after them; the set starts
again from the request's own choice only when the whole would no longer fit: more than `planner.max_thread_tools`
tools, or more of the model's context window than TOOL_SHARE (context_fit.py says how big the window is). A small
window binds fewer tools instead of refusing the turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from langchain_core.tools import BaseTool

TOOL_SHARE = 0.5  # of the context window, at most, for the tools' schemas; the rest is the conversation and the answer


def fit(tools: Sequence[BaseTool], fits: Callable[[list[BaseTool]], bool]) -> list[BaseTool]:
    """The longest head of `tools` (best first) that fits."""
    kept = list(tools)
    while kept and not fits(kept):
        kept.pop()
    return kept


def thread_tools(position: Mapping[str, int], others: Sequence[BaseTool], chosen: Sequence[BaseTool],
                 bound_before: Sequence[str], cap: int, fits: Callable[[list[BaseTool]], bool]) -> list[BaseTool]:
    """The tools to bind: those bound earlier in the thread (still in the catalog) in their order, then the
    request's `chosen` ones (best first) not among them, in the catalog's order; when that is more than `cap` tools
    or does not fit, the request's choice alone (as many of the best as fit), in the catalog's order. `position` is
    each name's place in `others` (the catalog): this runs at every planner step, and the catalog can hold a
    thousand tools, so nothing here goes through all of them."""
    bound = dict.fromkeys(n for n in bound_before if n in position)
    kept = [others[position[n]] for n in bound]
    new = [others[i] for i in sorted({position[t.name] for t in chosen if t.name in position and t.name not in bound})]
    listed = {t.name for t in new}
    new += [t for t in chosen if t.name not in bound and t.name not in listed]  # not in the catalog: last
    merged = kept + new
    if len(merged) <= cap and fits(merged):
        return merged
    fresh = {t.name for t in fit(list(chosen)[:cap], fits)}
    return [others[i] for i in sorted(position[n] for n in fresh if n in position)]


def first_found(by_name: Mapping[str, BaseTool], chosen: Sequence[BaseTool], found: Sequence[str]) -> list[BaseTool]:
    """`chosen` with the tools find_tools just found (best first) ahead of it: find_tools promises the planner
    every tool it found on its next step, so they come before the request's own picks when not all fit."""
    picked = [by_name[n] for n in dict.fromkeys(found) if n in by_name]
    names = {t.name for t in picked}
    return picked + [t for t in chosen if t.name not in names]
