"""The registry of generated tools (SQLAlchemy; `tool_registry.sqlite` by default, the engine is passed in).

One row per version: name, version, module and tests paths, sha256 of the module source, the source itself and
its tests (so workers on other machines sharing a PostgreSQL registry can run and re-test the tool without the
files), schema_json,
side_effects, spec_json, manifest, test report, status (`active`, `disabled`, `failed`), trust (`confirm`
until it has earned its declared policy, then `policy`), created_at. A new version of a name is `_v<n+1>`;
older versions stay listed. The version in use is the highest `active` one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Engine,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from orchestrator.core.kept_sqlite import data_version, watched_file

from .sql_schema import upgrade

ACTIVE, DISABLED, FAILED = "active", "disabled", "failed"
STATUSES = (ACTIVE, DISABLED, FAILED)
TRUST_CONFIRM, TRUST_POLICY = "confirm", "policy"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class RegistryBase(DeclarativeBase):
    """Tables of the tool registry database (a file of its own)."""


class ToolRow(RegistryBase):
    __tablename__ = "generated_tools"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_tool_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    tests_path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    schema_json: Mapped[str] = mapped_column(Text)
    side_effects: Mapped[str] = mapped_column(Text, default="[]")
    spec_json: Mapped[str] = mapped_column(Text)
    manifest_json: Mapped[str] = mapped_column(Text, default="{}")
    test_report: Mapped[str] = mapped_column(Text, default="{}")
    status: Mapped[str] = mapped_column(String(16), default=ACTIVE, index=True)
    trust: Mapped[str] = mapped_column(String(16), default=TRUST_CONFIRM)
    confirmed_calls: Mapped[int] = mapped_column(Integer, default=0)
    network_approved: Mapped[bool] = mapped_column(Boolean, default=False)
    request_key: Mapped[str | None] = mapped_column(String(512), unique=True, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now, onupdate=_now)
    source: Mapped[str | None] = mapped_column(Text, nullable=True)  # null in rows registered before it was kept
    tests_source: Mapped[str | None] = mapped_column(Text, nullable=True)  # likewise, for its tests


@dataclass
class ToolRecord:
    id: int
    name: str
    version: int
    path: str
    tests_path: str
    sha256: str
    schema: dict[str, Any]
    side_effects: list[str]
    spec: dict[str, Any]
    manifest: dict[str, Any]
    test_report: dict[str, Any]
    status: str
    trust: str
    confirmed_calls: int
    network_approved: bool
    created_at: datetime
    updated_at: datetime
    source: str | None = None
    tests_source: str | None = None

    @classmethod
    def from_row(cls, row: ToolRow) -> "ToolRecord":
        return cls(
            id=row.id, name=row.name, version=row.version, path=row.path, tests_path=row.tests_path, sha256=row.sha256,
            schema=json.loads(row.schema_json or "{}"), side_effects=json.loads(row.side_effects or "[]"),
            spec=json.loads(row.spec_json or "{}"), manifest=json.loads(row.manifest_json or "{}"),
            test_report=json.loads(row.test_report or "{}"), status=row.status, trust=row.trust,
            confirmed_calls=row.confirmed_calls, network_approved=bool(row.network_approved),
            created_at=row.created_at, updated_at=row.updated_at, source=row.source, tests_source=row.tests_source,
        )

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "version": self.version, "path": self.path, "tests_path": self.tests_path,
            "sha256": self.sha256, "side_effects": self.side_effects, "status": self.status, "trust": self.trust,
            "confirmed_calls": self.confirmed_calls, "network_approved": self.network_approved,
            "schema": self.schema, "spec": self.spec, "manifest": self.manifest, "test_report": self.test_report,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


class RegistryError(RuntimeError):
    """A registry operation cannot be done; the message says why."""


_ready: set[str] = set()


class ToolRegistry:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._revision_lock = threading.Lock()
        self._seen_version: tuple[int, int] | None = None  # _data_version() when _revision was read
        self._revision: tuple = ()
        key = str(engine.url)
        if key not in _ready:
            # Tables made here, or migrated when an earlier version made them (sql_schema.py).
            try:
                with engine.begin() as conn:
                    upgrade(conn, RegistryBase.metadata)
            except (OperationalError, ProgrammingError, IntegrityError):
                with engine.begin() as conn:  # another worker created or stamped them at the same moment
                    upgrade(conn, RegistryBase.metadata)
            _ready.add(key)

    # -- reading ------------------------------------------------------------------------------------------
    def versions(self, name: str) -> list[ToolRecord]:
        with Session(self.engine) as s:
            rows = s.scalars(select(ToolRow).where(ToolRow.name == name).order_by(ToolRow.version))
            return [ToolRecord.from_row(r) for r in rows]

    def get(self, name: str, version: int | None = None) -> ToolRecord | None:
        """A given version, or the one in use (the highest active)."""
        with Session(self.engine) as s:
            q = select(ToolRow).where(ToolRow.name == name)
            if version is not None:
                q = q.where(ToolRow.version == version)
            else:
                q = q.where(ToolRow.status == ACTIVE).order_by(ToolRow.version.desc()).limit(1)
            row = s.scalars(q).first()
            return ToolRecord.from_row(row) if row else None

    def latest(self, name: str) -> ToolRecord | None:
        """The highest version whatever its status."""
        with Session(self.engine) as s:
            row = s.scalars(select(ToolRow).where(ToolRow.name == name).order_by(ToolRow.version.desc()).limit(1)).first()
            return ToolRecord.from_row(row) if row else None

    def all(self) -> list[ToolRecord]:
        with Session(self.engine) as s:
            return [ToolRecord.from_row(r) for r in s.scalars(select(ToolRow).order_by(ToolRow.name, ToolRow.version))]

    def in_use(self) -> list[ToolRecord]:
        """For each name, its highest active version."""
        with Session(self.engine) as s:
            best = (select(ToolRow.name, func.max(ToolRow.version).label("v"))
                    .where(ToolRow.status == ACTIVE).group_by(ToolRow.name).subquery())
            rows = s.scalars(select(ToolRow).join(best, (ToolRow.name == best.c.name) & (ToolRow.version == best.c.v))
                             .order_by(ToolRow.name))
            return [ToolRecord.from_row(r) for r in rows]

    def revision(self) -> tuple:
        """Changes whenever a row is added, changed or deleted: a cheap check before re-reading everything. The
        catalog asks on every planner step; on SQLite, `PRAGMA data_version` of a connection that never writes
        says whether any other connection (of any process) committed since, and only then is the table read."""
        with self._revision_lock:
            version = self._data_version()
            if version is not None and version == self._seen_version:
                return self._revision
            with Session(self.engine) as s:
                self._revision = tuple(s.execute(select(func.count(ToolRow.id), func.max(ToolRow.updated_at),
                                                        func.max(ToolRow.id))).one())
            self._seen_version = version
            return self._revision

    def _data_version(self) -> tuple[int, int] | None:
        database = watched_file(self.engine)
        return data_version(database) if database is not None else None

    def names(self) -> set[str]:
        with Session(self.engine) as s:
            return set(s.scalars(select(ToolRow.name).distinct()))

    def by_request(self, request_key: str) -> ToolRecord | None:
        with Session(self.engine) as s:
            row = s.scalars(select(ToolRow).where(ToolRow.request_key == request_key)).first()
            return ToolRecord.from_row(row) if row else None

    def next_version(self, name: str) -> int:
        with Session(self.engine) as s:
            top = s.scalar(select(func.max(ToolRow.version)).where(ToolRow.name == name))
            return (top or 0) + 1

    # -- writing ------------------------------------------------------------------------------------------
    def add(self, *, name: str, version: int, path: str, tests_path: str, source: str, schema: dict, side_effects: list[str],
            spec: dict, manifest: dict, test_report: dict, trust: str, network_approved: bool,
            request_key: str | None = None, tests_source: str | None = None) -> ToolRecord:
        """Insert a version. Raises RegistryError('taken') when the (name, version) exists already."""
        row = ToolRow(
            name=name, version=version, path=path, tests_path=tests_path, sha256=sha256_text(source),
            schema_json=json.dumps(schema), side_effects=json.dumps(side_effects), spec_json=json.dumps(spec),
            manifest_json=json.dumps(manifest), test_report=json.dumps(test_report), status=ACTIVE, trust=trust,
            confirmed_calls=0, network_approved=network_approved, request_key=request_key,
            created_at=_now(), updated_at=_now(), source=source, tests_source=tests_source,
        )
        try:
            with Session(self.engine) as s, s.begin():
                s.add(row)
                s.flush()
                return ToolRecord.from_row(row)
        except IntegrityError:
            raise RegistryError("taken") from None

    def _update(self, name: str, version: int | None, **values: Any) -> list[ToolRecord]:
        with Session(self.engine) as s, s.begin():
            q = select(ToolRow).where(ToolRow.name == name)
            if version is not None:
                q = q.where(ToolRow.version == version)
            rows = list(s.scalars(q))
            if not rows:
                which = f"{name} v{version}" if version is not None else name
                raise RegistryError(f"no generated tool {which} is registered (see `jarvis tools list`)")
            for row in rows:
                for key, value in values.items():
                    setattr(row, key, value)
                row.updated_at = _now()
            s.flush()
            return [ToolRecord.from_row(r) for r in rows]

    def set_status(self, name: str, status: str, version: int | None = None) -> list[ToolRecord]:
        if status not in STATUSES:
            raise RegistryError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        return self._update(name, version, status=status)

    def set_trust(self, name: str, version: int, trust: str) -> ToolRecord:
        return self._update(name, version, trust=trust)[0]

    def set_test_report(self, name: str, version: int, report: dict, status: str | None = None) -> ToolRecord:
        values: dict[str, Any] = {"test_report": json.dumps(report)}
        if status:
            values["status"] = status
        return self._update(name, version, **values)[0]

    def record_confirmed_success(self, tool_id: int, trust_after: int) -> ToolRecord | None:
        """One more successful confirmed call; at `trust_after` of them the tool moves to its declared policy."""
        with Session(self.engine) as s, s.begin():
            s.execute(update(ToolRow).where(ToolRow.id == tool_id)
                      .values(confirmed_calls=ToolRow.confirmed_calls + 1, updated_at=_now()))
            s.execute(update(ToolRow).where(ToolRow.id == tool_id, ToolRow.trust == TRUST_CONFIRM,
                                            ToolRow.confirmed_calls >= trust_after)
                      .values(trust=TRUST_POLICY))
            row = s.get(ToolRow, tool_id)
            return ToolRecord.from_row(row) if row else None

    def delete_version(self, name: str, version: int) -> None:
        with Session(self.engine) as s, s.begin():
            row = s.scalars(select(ToolRow).where(ToolRow.name == name, ToolRow.version == version)).first()
            if row is not None:
                s.delete(row)
