"""Tools the user switched off by name, in the jarvis database: static and MCP tools (generated tools are switched
in JARB's registry, whose provider then stops offering them; see `jarvis tools disable` and api/tools.py).

The catalog (orchestrator/tools/catalog.py) leaves a disabled tool out of what the planner and jorb scripts are
given, and the executor answers a call to it with a message saying the user disabled it. The set is cached for
a second per process, so reading it on every planner step costs nothing, and a switch flipped by another
process (the CLI, the server) is seen within that second.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

from sqlalchemy import DateTime, String, Text, delete, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from orchestrator.core.config import Settings
from orchestrator.storage.engines import Base, jarvis_engine

CACHE_S = 1.0


class DisabledToolRow(Base):
    __tablename__ = "disabled_tools"

    name: Mapped[str] = mapped_column(String(256), primary_key=True)
    disabled_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    note: Mapped[str | None] = mapped_column(Text, nullable=True)


def disabled_message(name: str) -> str:
    return (f"Error: the user disabled the tool {name}; it was not run. Do not retry it; if the task needs it, tell "
            f"the user, who can enable it again (the web UI's Tools view, or `jarvis tools enable {name}`).")


class ToolSwitches:
    """Read and flip the disabled set. One instance per settings is enough; it is cheap to create."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._cache: frozenset[str] | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    @property
    def engine(self):
        return jarvis_engine(self.settings)

    def disabled(self) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            if self._cache is not None and now - self._read_at < CACHE_S:
                return self._cache
        with Session(self.engine) as s:
            names = frozenset(s.scalars(select(DisabledToolRow.name)))
        with self._lock:
            self._cache, self._read_at = names, now
        return names

    def is_disabled(self, name: str) -> bool:
        return name in self.disabled()

    def rows(self) -> list[DisabledToolRow]:
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.scalars(select(DisabledToolRow).order_by(DisabledToolRow.name)))

    def disable(self, name: str, note: str | None = None) -> None:
        with Session(self.engine) as s, s.begin():
            if s.get(DisabledToolRow, name) is None:
                s.add(DisabledToolRow(name=name, disabled_at=datetime.now(timezone.utc), note=note))
        self._forget()

    def enable(self, name: str) -> bool:
        """True if it was disabled."""
        with Session(self.engine) as s, s.begin():
            # through the session's connection: its result is the DELETE's cursor, which counts the rows deleted
            found = s.connection().execute(delete(DisabledToolRow).where(DisabledToolRow.name == name)).rowcount
        self._forget()
        return bool(found)

    def _forget(self) -> None:
        with self._lock:
            self._cache = None
