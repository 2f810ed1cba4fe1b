"""Memory: what Jarvis knows about the user across threads (entities, facts, relations with their provenance),
read before the planner plans and written with the user's consent.

    store = App().memory                       # None when memory.enabled is false
    store.remember("Dr Lee is my dentist", Provenance(SourceKind.MANUAL, True), about="Dr Lee", kind="person")
    store.relevant("book the dentist")         # the facts a turn should see
"""

from __future__ import annotations

from .context import memory_context
from .models import SourceKind
from .store import FactView, MemoryError, MemoryStore, Provenance
from .tools import build_memory_tools

__all__ = ["FactView", "MemoryError", "MemoryStore", "Provenance", "SourceKind", "build_memory_tools",
           "memory_context"]
