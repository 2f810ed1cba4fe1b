"""Memory as a JSON document, so it can move between machines: `jarvis memory export` / `import`.

Entities are named by (kind, name), never by row id, so a file imports into any database; provenance and times
travel with each fact. Importing twice changes nothing the second time (a fact already known is confirmed, not
copied). Vectors are not exported: they belong to one embeddings model and are made again on import.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import select

from .models import MemoryEntity, MemoryFact, MemoryRelation, SourceKind
from .store import MemoryError, MemoryStore, Provenance

FORMAT = "jarvis-memory"
VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EntityRef(_Strict):
    kind: str = Field(max_length=32)
    name: str = Field(min_length=1, max_length=200)


class EntityOut(EntityRef):
    link: str | None = Field(None, max_length=500)


class FactOut(_Strict):
    text: str = Field(min_length=1, max_length=1000)
    about: EntityRef | None = None
    source_kind: SourceKind
    source_ref: str | None = Field(None, max_length=500)
    source_detail: str | None = Field(None, max_length=500)
    trusted: bool
    learned_at: datetime
    confirmed_at: datetime
    expires_at: datetime | None = None


class RelationOut(_Strict):
    subject: EntityRef
    predicate: str = Field(min_length=1, max_length=64)
    object: EntityRef
    source_kind: SourceKind
    source_ref: str | None = Field(None, max_length=500)
    trusted: bool


class MemoryFile(_Strict):
    format: Literal["jarvis-memory"]
    version: Literal[1]
    entities: list[EntityOut] = Field(default_factory=list, max_length=1_000_000)
    facts: list[FactOut] = Field(default_factory=list, max_length=1_000_000)
    relations: list[RelationOut] = Field(default_factory=list, max_length=1_000_000)


def export_memory(store: MemoryStore) -> dict[str, Any]:
    with store._session() as s:
        entities = {e.id: e for e in s.scalars(select(MemoryEntity).order_by(MemoryEntity.kind, MemoryEntity.name_key))}
        facts = list(s.scalars(select(MemoryFact).order_by(MemoryFact.learned_at, MemoryFact.id)))
        relations = list(s.scalars(select(MemoryRelation).order_by(MemoryRelation.id)))

    def ref(entity_id: int | None) -> dict[str, str] | None:
        e = entities.get(entity_id) if entity_id is not None else None
        return {"kind": e.kind, "name": e.name} if e is not None else None

    return {
        "format": FORMAT, "version": VERSION,
        "entities": [{"kind": e.kind, "name": e.name, "link": e.link} for e in entities.values()],
        "facts": [{"text": f.text, "about": ref(f.entity_id), "source_kind": str(f.source_kind),
                   "source_ref": f.source_ref, "source_detail": f.source_detail, "trusted": f.trusted,
                   "learned_at": f.learned_at.isoformat(), "confirmed_at": f.confirmed_at.isoformat(),
                   "expires_at": f.expires_at.isoformat() if f.expires_at else None} for f in facts],
        "relations": [{"subject": ref(r.subject_id), "predicate": r.predicate, "object": ref(r.object_id),
                       "source_kind": str(r.source_kind), "source_ref": r.source_ref, "trusted": r.trusted}
                      for r in relations],
    }


def _aware(value: datetime) -> datetime:
    from datetime import timezone

    return value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)


def import_memory(store: MemoryStore, data: Any, *, trust: bool = False) -> dict[str, int]:
    """Add a file's memory to the store. The whole file is checked before anything is written; a bad file says
    which entry is wrong. A file can say anything about where its facts came from: they are kept as imported and
    untrusted (shown to the planner as data, never as the user's words), unless `trust` (the user's own export,
    moved to another machine) keeps what the file says. Either way its source fields are one line each."""

    def provenance(kind: SourceKind, trusted: bool, ref: str | None, detail: str | None = None) -> Provenance:
        if trust:
            return Provenance(kind, trusted, _one_line(ref), _one_line(detail))
        said = f"the file said: {kind}" + (", trusted" if trusted else "") + (f"; {detail}" if detail else "")
        return Provenance(SourceKind.IMPORT, False, _one_line(ref), _one_line(said))

    try:
        parsed = MemoryFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise MemoryError(f"not a Jarvis memory file: {where}: {first['msg']} ({exc.error_count()} problem(s))") from None
    for item in [*parsed.entities, *(f.about for f in parsed.facts if f.about),
                 *(r.subject for r in parsed.relations), *(r.object for r in parsed.relations)]:
        store.check_kind(item.kind)
    added = {"entities": 0, "facts": 0, "relations": 0}
    before = store.stats()
    for e in parsed.entities:
        store.ensure_entity(e.name, e.kind, e.link)
    for f in parsed.facts:
        view = store.remember(f.text, provenance(f.source_kind, f.trusted, f.source_ref, f.source_detail),
                              about=f.about.name if f.about else None, kind=f.about.kind if f.about else None,
                              expires_at=_aware(f.expires_at) if f.expires_at else None)
        store.set_times(view.id, _aware(f.learned_at), _aware(f.confirmed_at))
    for r in parsed.relations:
        store.relate(r.subject.name, r.predicate, r.object.name, provenance(r.source_kind, r.trusted, r.source_ref),
                     subject_kind=r.subject.kind, object_kind=r.object.kind)
    after = store.stats()
    for key in added:
        added[key] = after[key] - before[key]
    return added


def _one_line(text: str | None) -> str | None:
    """A source field as one line: a line break in it could start what reads as another section of the prompt."""
    return " ".join(text.split())[:500] if text else text
