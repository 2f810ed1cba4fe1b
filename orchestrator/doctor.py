"""`jarvis doctor`: is this machine ready to run Jarvis, and what to do where it is not."""

from __future__ import annotations

import importlib

# Every module that defines tables of the jarvis database: a light command imports only some of them, the
# schema check needs them all.
TABLE_MODULES = ["orchestrator.ledger", "orchestrator.threads", "orchestrator.telemetry", "orchestrator.claims",
                 "orchestrator.workers", "orchestrator.tool_switches", "orchestrator.channels.models",
                 "orchestrator.jorbs.models", "orchestrator.reminders.models", "orchestrator.android_tasks"]


def import_table_modules() -> None:
    for name in TABLE_MODULES:
        importlib.import_module(name)
