"""Which of a thread's checkpoints a trim removes: one rule for SQLite (storage/checkpoints.py) and PostgreSQL
(storage/pg.py), which differ only in how they run the query."""

from __future__ import annotations

from collections.abc import Callable

NEWEST_FIRST = ("SELECT checkpoint_id FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = '' "
                "ORDER BY checkpoint_id DESC LIMIT {p}")
NEWEST_FIRST_UP_TO = ("SELECT checkpoint_id FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = '' "
                      "AND checkpoint_id <= {p} ORDER BY checkpoint_id DESC LIMIT {p}")


def newest_gone(ids: Callable[[str, tuple], list[str]], placeholder: str, thread_id: str, keep: int,
                runs_from: str | None) -> str | None:
    """The id of the newest checkpoint that goes (it and every older one), or None when nothing goes. `ids` runs a
    query (written with `placeholder`) and returns the ids it selects. Checkpoint ids grow with time (LangGraph's
    are UUIDv6), so "older" is "smaller".

    `runs_from`: the trim of a step whose own checkpoint is not written yet (see checkpoints.prune_thread): that
    checkpoint is one of the kept, so keep - 1 of those up to the one it runs from, and that one at least (the
    newest written until the step's own lands; PostgreSQL's next checkpoint shares its channel blobs)."""
    if runs_from is None:
        newest = ids(NEWEST_FIRST.format(p=placeholder), (thread_id, keep + 1))
    else:
        keep = max(keep - 1, 1)
        newest = ids(NEWEST_FIRST_UP_TO.format(p=placeholder), (thread_id, runs_from, keep + 1))
    return newest[keep] if len(newest) > keep else None
