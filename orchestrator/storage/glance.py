"""A glance at the jarvis database through the standard library's sqlite3 alone, for a command that only needs to
know whether anything may be waiting for the user (`jarvis pending` when nothing is): SQLAlchemy and the table
models are more than half of such a command's start-up (a second or more on a busy machine), to read two rows.

Read-only, and it only ever says "nothing waits" for certain: with PostgreSQL (`storage.url`), a file it cannot read
or a table it does not find it answers None, and the caller takes the full path (storage/threads.ThreadIndex,
tools/ledger.EffectsLedger), which says what is wrong in its own words. The table and status names are those of
storage/threads.py and tools/ledger.py; tests/test_run_startup.py checks this glance against them through the real
tables.
"""

from __future__ import annotations

import sqlite3
import sys

from orchestrator.core.config import Settings

JARVIS_FILE = "jarvis.sqlite"  # storage/engines.JARVIS_DB's file under storage.data_dir
# A thread whose turn runs or waits for the user (storage/threads.ThreadStatus), a tool call started and not yet
# completed (tools/ledger.STARTED): either may hold a confirmation.
MAY_WAIT = ("SELECT EXISTS (SELECT 1 FROM threads WHERE status IN ('running', 'waiting')) "
            "OR EXISTS (SELECT 1 FROM effects_ledger WHERE status = 'started')")


def anything_may_wait(settings: Settings) -> bool | None:
    """False when no thread runs or waits and no tool call is in doubt; True when one may; None: cannot tell here."""
    if settings.storage.url:
        return None
    writer = sys.modules.get("orchestrator.storage.writer")
    if writer is not None:  # this process queued bookkeeping (a thread's status): on disk before the look
        writer.flush()
    path = settings.data_dir / JARVIS_FILE
    if not path.exists():
        return False  # no Jarvis has run with this data folder: nothing was ever asked
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            (found,) = conn.execute(MAY_WAIT).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:  # a table not made yet, a file locked or unreadable: the full path decides
        return None
    return bool(found)
