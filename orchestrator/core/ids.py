"""The ids that name things across modules, written once: a jorb's thread id is `jorb:<jorb id>`.

A jorb runs in a LangGraph thread of its own, so everything keyed by thread id (checkpoints, claims, the effects
ledger, pending confirmations) names it this way; these two functions are the only place that spells it.
"""

from __future__ import annotations

JORB_PREFIX = "jorb:"


def jorb_thread_id(jorb_id: str) -> str:
    return f"{JORB_PREFIX}{jorb_id}"


def jorb_id_of(thread_id: str | None) -> str | None:
    """The jorb a thread id belongs to, or None for a chat thread (or no thread)."""
    if thread_id and thread_id.startswith(JORB_PREFIX):
        return thread_id[len(JORB_PREFIX):] or None
    return None
