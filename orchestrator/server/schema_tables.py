"""Every module that defines tables of the jarvis database. A light command imports only some of them; checking
or migrating the whole schema (jarvis doctor, the health report, the migration tests) needs them all. It sits with
the entry points because it reaches into every feature package (by name)."""

from __future__ import annotations

import importlib

TABLE_MODULES = ["orchestrator.tools.ledger", "orchestrator.storage.threads", "orchestrator.storage.telemetry",
                 "orchestrator.storage.claims", "orchestrator.storage.workers", "orchestrator.tools.switches",
                 "orchestrator.channels.models", "orchestrator.jorbs.models", "orchestrator.reminders.models",
                 "orchestrator.android.tasks", "orchestrator.approvals.store",
                 "orchestrator.memory.models"]


def import_table_modules() -> None:
    for name in TABLE_MODULES:
        importlib.import_module(name)
