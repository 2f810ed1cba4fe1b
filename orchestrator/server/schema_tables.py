"""Every module that defines tables of the jarvis database. A light command imports only some of them; checking
or migrating the whole schema (jarvis doctor, the health report, the migration tests) needs them all. It sits with
the entry points because it reaches into every feature package (by name)."""

from __future__ import annotations

import importlib

from orchestrator.core.config import Settings

TABLE_MODULES = ["orchestrator.tools.ledger", "orchestrator.storage.threads", "orchestrator.storage.telemetry",
                 "orchestrator.storage.claims", "orchestrator.storage.workers", "orchestrator.tools.switches",
                 "orchestrator.channels.models", "orchestrator.jorbs.models", "orchestrator.reminders.models",
                 "orchestrator.android.tasks", "orchestrator.approvals.store",
                 "orchestrator.memory.models"]


def import_table_modules() -> None:
    for name in TABLE_MODULES:
        importlib.import_module(name)


def migrate_whole_schema(settings: Settings) -> None:
    """Bring every table of the jarvis database up to date (`jarvis run` at start): the App imports a part's modules
    only when it builds the part, so opening the stores it uses would leave the others' tables as they were."""
    from orchestrator.storage.engines import jarvis_engine

    import_table_modules()
    jarvis_engine(settings)  # ensure_schema, with every table known
