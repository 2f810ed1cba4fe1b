"""The memory store: entities, facts and relations in the jarvis database, searchable by keywords and vectors.

Keyword search is the database's own: an FTS5 table over the facts on SQLite (kept in step by triggers, so a
forgotten fact leaves the index in the same transaction), a GIN-indexed `to_tsvector` expression on PostgreSQL
(the index is over the row itself: a deleted row has nothing left to find). Vectors, when an embeddings endpoint
is configured, sit in the fact's own row and are searched in memory as the document index does
(docs_index/store.py); the two rankings are fused by reciprocal rank (`docs_index.fuse`). A generation counter in
`memory_meta` is bumped by every write, so the vector cache of every process sees a change.
"""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, delete, func, or_, select, text, update
from sqlalchemy.orm import Session

from orchestrator.core.config import Settings
from orchestrator.core.kept_sqlite import first_row, watched_file
from orchestrator.docs_index.store import fuse
from orchestrator.llm.embeddings import Embedder, make_embedder
from orchestrator.storage import engines as storage
from .models import MemoryEntity, MemoryFact, MemoryMeta, MemoryRelation, SourceKind

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

MAX_FACT_CHARS = 1000
MAX_NAME_CHARS = 200
CANDIDATES = 50
_WORD = re.compile(r"\w+", re.UNICODE)
# Words that occur in most facts: left out of the keyword query, where they would only make the database score
# nearly every row (a fixed list: the memory is small and personal, its own statistics would say little).
STOP_WORDS = frozenset("""a an and are as at be been but by can could did do does for from had has have he her
hers him his how i if in into is it its me my mine no not of on or our ours she so than that the their them then
there these they this to too us was we were what when where which who whom whose why will with would you your
yours about remember tell told know knows""".split())

_SQLITE_DDL = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_facts_fts USING fts5(search_text, content='memory_facts', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS memory_facts_ai AFTER INSERT ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
    "CREATE TRIGGER IF NOT EXISTS memory_facts_ad AFTER DELETE ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts(memory_facts_fts, rowid, search_text) VALUES ('delete', old.id, old.search_text); END",
    "CREATE TRIGGER IF NOT EXISTS memory_facts_au AFTER UPDATE OF search_text ON memory_facts BEGIN "
    "INSERT INTO memory_facts_fts(memory_facts_fts, rowid, search_text) VALUES ('delete', old.id, old.search_text); "
    "INSERT INTO memory_facts_fts(rowid, search_text) VALUES (new.id, new.search_text); END",
]
_PG_DDL = ["CREATE INDEX IF NOT EXISTS memory_facts_tsv ON memory_facts "
           "USING gin (to_tsvector('english', search_text))"]


_RANKERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memory-vectors")


class MemoryError(ValueError):
    """A memory request that cannot be done as asked; the message says what to do instead."""


@dataclass(frozen=True)
class Provenance:
    """Where a fact came from. `trusted`: the user's own words or act; False for anything drawn from content."""

    source_kind: SourceKind
    trusted: bool
    source_ref: str | None = None
    source_detail: str | None = None


@dataclass
class FactView:
    id: int
    text: str
    entity_id: int | None
    entity: str | None
    entity_kind: str | None
    source_kind: str
    source_ref: str | None
    source_detail: str | None
    trusted: bool
    learned_at: datetime
    confirmed_at: datetime
    expires_at: datetime | None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("learned_at", "confirmed_at", "expires_at"):
            out[key] = out[key].isoformat() if out[key] is not None else None
        return out

    @property
    def source(self) -> str:
        """Where it came from, in words (the planner cites it, the UI shows it)."""
        what = {"user": "told by the user", "content": "drawn from content read", "manual": "written by the user",
                "import": "imported", "extraction": "proposed from a conversation and approved"}.get(
                    str(self.source_kind), str(self.source_kind))
        where = f" in {self.source_ref}" if self.source_ref else ""
        return f"{what}{where}, {self.learned_at.date().isoformat()}"


def name_key(name: str) -> str:
    """A name as a message would name it: lowercase words, single spaces ("Dr. Lee" -> "dr lee")."""
    return " ".join(_WORD.findall(name.lower()))


def query_words(query: str) -> list[str]:
    words = [w for w in dict.fromkeys(_WORD.findall(query.lower())) if w not in STOP_WORDS and (len(w) > 1 or w.isdigit())]
    return words[:32]


class MemoryStore:
    def __init__(self, settings: Settings, embedder: Embedder | None = None, engine: Engine | None = None):
        self.settings = settings
        self.kinds = list(settings.memory.kinds)
        self.embedder = embedder if embedder is not None else make_embedder(settings)
        self.engine = engine or storage.engine_for(settings, storage.JARVIS_DB)
        self._ready = False
        self._lock = threading.Lock()
        self._matrix: tuple[str, Any, Any] | None = None  # (generation, ids, vectors)

    # -- schema ------------------------------------------------------------------------------------
    def ensure(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            storage.ensure_schema(self.engine)
            with storage.schema_transaction(self.engine) as conn:
                if self.postgres:
                    for ddl in _PG_DDL:
                        conn.exec_driver_sql(ddl)
                else:
                    had = conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = 'memory_facts_fts'").first()
                    for ddl in _SQLITE_DDL:
                        conn.exec_driver_sql(ddl)
                    if had is None:  # facts written before the index existed (an older Jarvis) are indexed now
                        conn.exec_driver_sql("INSERT INTO memory_facts_fts(memory_facts_fts) VALUES ('rebuild')")
            self._ready = True

    @property
    def postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def _session(self) -> Session:
        self.ensure()
        return Session(self.engine, expire_on_commit=False)

    @staticmethod
    def _bump(s: Session) -> None:
        storage.bump_generation(s, MemoryMeta)

    def generation(self) -> str:
        with self._session() as s:
            row = s.get(MemoryMeta, "generation")
            return row.value if row is not None else "0"

    # -- entities ----------------------------------------------------------------------------------
    def check_kind(self, kind: str) -> str:
        kind = (kind or "").strip().lower()
        if kind not in self.kinds:
            raise MemoryError(f"unknown entity kind {kind!r}: use one of {', '.join(self.kinds)} "
                              "(memory.kinds in the config adds more)")
        return kind

    @staticmethod
    def _check_name(name: str) -> str:
        name = " ".join((name or "").split())
        if not name_key(name):
            raise MemoryError("an entity needs a name with letters or digits")
        if len(name) > MAX_NAME_CHARS:
            raise MemoryError(f"an entity's name is at most {MAX_NAME_CHARS} characters")
        return name

    def _find_entity(self, s: Session, name: str, kind: str | None) -> MemoryEntity | None:
        query = select(MemoryEntity).where(MemoryEntity.name_key == name_key(name))
        if kind:
            query = query.where(MemoryEntity.kind == kind)
        found = list(s.scalars(query.order_by(MemoryEntity.id)))
        if len(found) > 1 and not kind:
            kinds = ", ".join(sorted({e.kind for e in found}))
            raise MemoryError(f"{name!r} names several entities ({kinds}): say which kind")
        return found[0] if found else None

    def _entity(self, s: Session, name: str, kind: str | None, link: str | None = None) -> MemoryEntity:
        name = self._check_name(name)
        kind = self.check_kind(kind) if kind else None
        entity = self._find_entity(s, name, kind)
        if entity is None:
            entity = MemoryEntity(kind=kind or "thing", name=name, name_key=name_key(name), link=link,
                                  created_at=storage.utcnow())
            s.add(entity)
            s.flush()
        elif link and not entity.link:
            entity.link = link
        return entity

    def ensure_entity(self, name: str, kind: str, link: str | None = None) -> int:
        with self._session() as s, s.begin():
            entity = self._entity(s, name, kind, link)
            self._bump(s)
            return entity.id

    def entities(self, kind: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        with self._session() as s:
            counts = (select(MemoryFact.entity_id, func.count().label("n")).group_by(MemoryFact.entity_id).subquery())
            query = (select(MemoryEntity, func.coalesce(counts.c.n, 0))
                     .outerjoin(counts, counts.c.entity_id == MemoryEntity.id).order_by(MemoryEntity.name_key))
            if kind:
                query = query.where(MemoryEntity.kind == kind)
            return [{"id": e.id, "kind": e.kind, "name": e.name, "link": e.link, "facts": n}
                    for e, n in s.execute(query.limit(limit))]

    def entity_by(self, ref: str | int) -> MemoryEntity | None:
        with self._session() as s:
            if isinstance(ref, int) or str(ref).isdigit():
                return s.get(MemoryEntity, int(ref))
            return self._find_entity(s, str(ref), None)

    # -- writing -----------------------------------------------------------------------------------
    @staticmethod
    def _check_text(fact: str) -> str:
        fact = " ".join((fact or "").split())  # one line: a fact cannot fake a new section of the prompt
        if not fact:
            raise MemoryError("the fact is empty: say what to remember")
        if len(fact) > MAX_FACT_CHARS:
            raise MemoryError(f"a fact is at most {MAX_FACT_CHARS} characters; split it into several")
        return fact

    def _vector(self, search_text: str) -> bytes | None:
        import numpy as np

        if self.embedder.cfg is None:
            return None
        vectors = self.embedder.embed([search_text])
        return vectors[0].astype(np.float32).tobytes() if vectors else None

    def remember(self, fact: str, provenance: Provenance, *, about: str | None = None, kind: str | None = None,
                 expires_at: datetime | None = None, link: str | None = None) -> FactView:
        """Store one fact (about an entity, created when new). The same fact about the same entity again is
        confirmed (its confirmed_at moves), not stored twice; a trusted telling makes an untrusted copy trusted."""
        fact = self._check_text(fact)
        shown = self._check_name(about) if about else None
        # embedded before the transaction: an HTTP call must not hold the database's write lock
        vector = self._vector(f"{shown}: {fact}" if shown else fact)
        with self._session() as s, s.begin():
            entity = self._entity(s, about, kind, link) if about else None
            search_text = f"{entity.name}: {fact}" if entity is not None else fact
            now = storage.utcnow()
            same = s.scalars(select(MemoryFact).where(
                MemoryFact.text == fact,
                MemoryFact.entity_id == entity.id if entity is not None else MemoryFact.entity_id.is_(None))).first()
            if same is not None:
                same.confirmed_at = now
                if provenance.trusted and not same.trusted:
                    same.trusted, same.source_kind = True, provenance.source_kind
                    same.source_ref, same.source_detail = provenance.source_ref, provenance.source_detail
                if expires_at is not None:
                    same.expires_at = expires_at
                row = same
            else:
                row = MemoryFact(entity_id=entity.id if entity is not None else None, text=fact, search_text=search_text,
                                 source_kind=provenance.source_kind, source_ref=provenance.source_ref,
                                 source_detail=provenance.source_detail, trusted=provenance.trusted,
                                 learned_at=now, confirmed_at=now, expires_at=expires_at,
                                 embedding=vector)
                s.add(row)
            self._bump(s)
            s.flush()
            fact_id = row.id
        return self.get(fact_id)  # type: ignore[return-value]

    def set_times(self, fact_id: int, learned_at: datetime, confirmed_at: datetime) -> None:
        """An imported fact keeps when it was first learned and last confirmed."""
        with self._session() as s, s.begin():
            s.execute(update(MemoryFact).where(MemoryFact.id == fact_id)
                      .values(learned_at=learned_at, confirmed_at=confirmed_at))

    def relate(self, subject: str, predicate: str, obj: str, provenance: Provenance, *,
               subject_kind: str | None = None, object_kind: str | None = None) -> dict[str, Any]:
        predicate = " ".join((predicate or "").split()).lower()
        if not predicate or len(predicate) > 64:
            raise MemoryError("a relation needs a short name (at most 64 characters), such as 'works at'")
        with self._session() as s, s.begin():
            a = self._entity(s, subject, subject_kind)
            b = self._entity(s, obj, object_kind)
            found = s.scalars(select(MemoryRelation).where(MemoryRelation.subject_id == a.id,
                                                           MemoryRelation.predicate == predicate,
                                                           MemoryRelation.object_id == b.id)).first()
            if found is None:
                found = MemoryRelation(subject_id=a.id, predicate=predicate, object_id=b.id,
                                       source_kind=provenance.source_kind, source_ref=provenance.source_ref,
                                       source_detail=provenance.source_detail, trusted=provenance.trusted,
                                       learned_at=storage.utcnow())
                s.add(found)
            self._bump(s)
            s.flush()
            return {"id": found.id, "subject": a.name, "predicate": predicate, "object": b.name,
                    "trusted": found.trusted}

    def update(self, fact_id: int, provenance: Provenance, *, fact: str | None = None,
               expires_at: datetime | None = None, clear_expiry: bool = False) -> FactView:
        """Change a fact's text or expiry. The new text is the updater's: its provenance becomes theirs."""
        current = self.get(fact_id)
        if current is None:
            raise MemoryError(f"there is no remembered fact {fact_id}: memory_search finds facts and their ids")
        if fact is not None:
            fact = self._check_text(fact)
            search_text = f"{current.entity}: {fact}" if current.entity else fact
            vector = self._vector(search_text)  # before the transaction, as in remember
        with self._session() as s, s.begin():
            row = s.get(MemoryFact, fact_id)
            if row is None:
                raise MemoryError(f"fact {fact_id} was forgotten meanwhile")
            if fact is not None:
                row.text, row.search_text, row.embedding = fact, search_text, vector
                row.source_kind, row.trusted = provenance.source_kind, provenance.trusted
                row.source_ref, row.source_detail = provenance.source_ref, provenance.source_detail
            if expires_at is not None or clear_expiry:
                row.expires_at = expires_at
            row.confirmed_at = storage.utcnow()
            self._bump(s)
        return self.get(fact_id)  # type: ignore[return-value]

    def forget(self, fact_id: int) -> FactView | None:
        """Delete a fact: its row, its keyword index entry (the trigger / the row's own tsvector) and its vector
        (in the row) go in one transaction. The messages it came from stay where they are."""
        view = self.get(fact_id)
        if view is None:
            return None
        with self._session() as s, s.begin():
            s.execute(delete(MemoryFact).where(MemoryFact.id == fact_id))
            self._bump(s)
        self._matrix = None
        return view

    def forget_entity(self, ref: str | int) -> tuple[str, int] | None:
        """Delete an entity, every fact about it and its relations. Returns (name, facts deleted)."""
        entity = self.entity_by(ref)
        if entity is None:
            return None
        with self._session() as s, s.begin():
            # facts one statement each side of the entity: the FTS trigger fires per row on SQLite either way
            gone = s.execute(delete(MemoryFact).where(MemoryFact.entity_id == entity.id)).rowcount
            s.execute(delete(MemoryRelation).where(or_(MemoryRelation.subject_id == entity.id,
                                                       MemoryRelation.object_id == entity.id)))
            s.execute(delete(MemoryEntity).where(MemoryEntity.id == entity.id))
            self._bump(s)
        self._matrix = None
        return entity.name, gone

    # -- reading -----------------------------------------------------------------------------------
    def _views(self, s: Session, fact_ids: list[int]) -> dict[int, FactView]:
        if not fact_ids:
            return {}
        rows = s.execute(select(MemoryFact, MemoryEntity.name, MemoryEntity.kind)
                         .outerjoin(MemoryEntity, MemoryEntity.id == MemoryFact.entity_id)
                         .where(MemoryFact.id.in_(fact_ids))).all()
        return {f.id: FactView(f.id, f.text, f.entity_id, name, kind, str(f.source_kind), f.source_ref,
                               f.source_detail, f.trusted, f.learned_at, f.confirmed_at, f.expires_at)
                for f, name, kind in rows}

    def get(self, fact_id: int) -> FactView | None:
        with self._session() as s:
            return self._views(s, [fact_id]).get(fact_id)

    def facts(self, entity_id: int | None = None, limit: int = 200, offset: int = 0) -> list[FactView]:
        with self._session() as s:
            query = select(MemoryFact.id).order_by(MemoryFact.id.desc())
            if entity_id is not None:
                query = query.where(MemoryFact.entity_id == entity_id)
            ids = list(s.scalars(query.limit(limit).offset(offset)))
            views = self._views(s, ids)
            return [views[i] for i in ids if i in views]

    def about(self, ref: str | int) -> dict[str, Any] | None:
        entity = self.entity_by(ref)
        if entity is None:
            return None
        with self._session() as s:
            rels = s.execute(select(MemoryRelation).where(or_(MemoryRelation.subject_id == entity.id,
                                                              MemoryRelation.object_id == entity.id))).scalars().all()
            names = {e.id: e.name for e in s.scalars(select(MemoryEntity).where(
                MemoryEntity.id.in_({r.subject_id for r in rels} | {r.object_id for r in rels})))}
        return {"id": entity.id, "kind": entity.kind, "name": entity.name, "link": entity.link,
                "facts": [f.as_dict() for f in self.facts(entity.id, limit=100)],
                "relations": [{"id": r.id, "subject": names.get(r.subject_id), "predicate": r.predicate,
                               "object": names.get(r.object_id), "trusted": r.trusted,
                               "source_kind": str(r.source_kind), "source_ref": r.source_ref} for r in rels]}

    def keyword_ranking(self, query: str, limit: int = CANDIDATES) -> list[int]:
        words = query_words(query)
        if not words:
            return []
        with self._session() as s:
            if self.postgres:
                tsq = " | ".join(words)  # \w+ words only: nothing of to_tsquery's syntax gets through
                sql = ("SELECT id FROM memory_facts WHERE to_tsvector('english', search_text) @@ "
                       "to_tsquery('english', :q) ORDER BY ts_rank(to_tsvector('english', search_text), "
                       "to_tsquery('english', :q)) DESC, id LIMIT :n")
                return [r[0] for r in s.execute(text(sql), {"q": tsq, "n": limit})]
            match = " OR ".join(f'"{w}"' for w in words)
            sql = ("SELECT rowid FROM memory_facts_fts WHERE memory_facts_fts MATCH :m "
                   "ORDER BY bm25(memory_facts_fts) LIMIT :n")
            return [r[0] for r in s.execute(text(sql), {"m": match, "n": limit})]

    def _vectors(self) -> tuple[np.ndarray, np.ndarray] | None:
        import numpy as np

        generation = self.generation()
        cached = self._matrix
        if cached is None or cached[0] != generation:
            with self._session() as s:
                rows = s.execute(select(MemoryFact.id, MemoryFact.embedding)
                                 .where(MemoryFact.embedding.is_not(None))).all()
            if rows:
                dims = len(rows[0][1]) // 4
                rows = [r for r in rows if len(r[1]) == dims * 4]  # vectors of another model are left out
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dims)
            else:
                ids, matrix = np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32)
            cached = self._matrix = (generation, ids, matrix)
        return None if cached[1].size == 0 else (cached[1], cached[2])

    def vector_ranking(self, query: str, limit: int = CANDIDATES) -> list[int]:
        import numpy as np

        if self.embedder.cfg is None or not query_words(query):  # nothing to mean: no nearest neighbours either
            return []
        found = self._vectors()
        if found is None:
            return []
        vectors = self.embedder.embed([query])
        if not vectors:
            return []
        ids, matrix = found
        if vectors[0].shape[0] != matrix.shape[1]:
            log.warning("memory: the embeddings model changed; facts keep keyword search until re-embedded")
            return []
        # numpy's own loop on one core, not OpenBLAS's product: OpenBLAS's threads spin between calls, and on 2
        # busy cores they took the CPU from everything else (bench/memory.py at 100,000 facts, hybrid: median
        # 35-41 ms and 22 ms of CPU a query with them, 18-19 ms and 13 ms of CPU with OpenBLAS held to one thread)
        scores = np.einsum("ij,j->i", matrix, vectors[0])
        top = min(limit, len(scores))
        best = np.argpartition(-scores, top - 1)[:top]
        # the nearest facts are not always near: below memory.min_similarity a fact is not about the query at all
        floor = self.settings.memory.min_similarity
        return [int(ids[i]) for i in best[np.argsort(-scores[best])] if scores[i] >= floor]

    def search(self, query: str, k: int = 10, *, include_expired: bool = False) -> list[FactView]:
        # The two rankings at once: SQLite's FTS5 and numpy's product both let go of the GIL. The product reads the
        # whole vector matrix (150 MB at 100,000 facts of 384 dimensions): about 4 ms on one core, about as long as
        # the keyword ranking of a query naming a common name (bm25 over thousands of matches).
        vectors = _RANKERS.submit(self.vector_ranking, query) if self.embedder.cfg is not None else None
        keywords = self.keyword_ranking(query)
        fused = fuse(keywords, vectors.result() if vectors is not None else [])
        with self._session() as s:
            views = self._views(s, [fid for fid, _ in fused[:max(k * 3, k)]])
        now = storage.utcnow()
        out = [views[fid] for fid, _ in fused if fid in views
               and (include_expired or views[fid].expires_at is None or views[fid].expires_at > now)]
        return out[:k]

    def named_entities(self, message: str, limit: int = 10) -> list[int]:
        """Entities the message names: every run of 1 to 4 of its words looked up by normalised name."""
        words = _WORD.findall(message.lower())[:400]
        grams = {" ".join(words[i:i + n]) for n in range(1, 5) for i in range(len(words) - n + 1)}
        grams = {g for g in grams if g not in STOP_WORDS}
        if not grams:
            return []
        with self._session() as s:
            return list(s.scalars(select(MemoryEntity.id).where(MemoryEntity.name_key.in_(sorted(grams)))
                                  .order_by(MemoryEntity.id).limit(limit)))

    def relevant(self, message: str, k: int = 10) -> list[FactView]:
        """The facts a turn should see: those about the entities it names (most recently confirmed first), then
        the best matches of the search, without expired ones."""
        if not self.holds_facts():  # every turn asks: an empty memory answers with one probe, not three searches
            return []
        now = storage.utcnow()
        picked: dict[int, FactView] = {}
        entity_ids = self.named_entities(message)
        if entity_ids:
            with self._session() as s:
                ids = list(s.scalars(select(MemoryFact.id).where(MemoryFact.entity_id.in_(entity_ids))
                                     .order_by(MemoryFact.confirmed_at.desc(), MemoryFact.id.desc()).limit(k)))
                views = self._views(s, ids)
            for fid in ids:
                view = views.get(fid)
                if view is not None and (view.expires_at is None or view.expires_at > now):
                    picked[fid] = view
        if len(picked) < k:
            for view in self.search(message, k):
                picked.setdefault(view.id, view)
        return list(picked.values())[:k]

    def holds_facts(self) -> bool:
        self.ensure()
        database = watched_file(self.engine)
        if database is not None:  # every turn asks: one statement on a kept connection (core/kept_sqlite.py)
            return first_row(database, f"SELECT 1 FROM {MemoryFact.__tablename__} LIMIT 1") is not None
        with self.engine.connect() as conn:  # a Core probe of the primary key: a tenth of an ORM session's cost
            return conn.execute(select(MemoryFact.id).limit(1)).first() is not None

    def stats(self) -> dict[str, int]:
        with self._session() as s:
            return {"entities": s.scalar(select(func.count()).select_from(MemoryEntity)) or 0,
                    "facts": s.scalar(select(func.count()).select_from(MemoryFact)) or 0,
                    "relations": s.scalar(select(func.count()).select_from(MemoryRelation)) or 0,
                    "vectors": s.scalar(select(func.count()).select_from(MemoryFact)
                                        .where(MemoryFact.embedding.is_not(None))) or 0}

    def fill_missing_vectors(self) -> int:
        """Embed facts stored while no endpoint answered. Returns how many got a vector."""
        import numpy as np

        if not self.embedder.available():
            return 0
        done = 0
        while True:
            with self._session() as s:
                rows = s.execute(select(MemoryFact.id, MemoryFact.search_text)
                                 .where(MemoryFact.embedding.is_(None)).limit(256)).all()
            vectors = self.embedder.embed([r.search_text for r in rows]) if rows else None
            if not vectors:
                return done
            with self._session() as s, s.begin():
                for row, vec in zip(rows, vectors):
                    s.execute(update(MemoryFact).where(MemoryFact.id == row.id)
                              .values(embedding=vec.astype(np.float32).tobytes()))
                self._bump(s)
            done += len(rows)
