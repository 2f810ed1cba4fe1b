"""The document index: `docs_index.sqlite` with documents, chunks, SQLite FTS5 and optional vectors.

Search ranks chunks by keywords (FTS5 bm25, porter stemming) and, when an embeddings endpoint is configured,
by cosine similarity of their vectors; the two rankings are combined by reciprocal rank fusion. Vectors are
kept as float32 blobs and searched in memory (a numpy matrix rebuilt when the index changes).
"""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import (Engine, Float, ForeignKey, Integer, LargeBinary, String, Text, delete, func, insert, select,
                        text, update)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from integrations.documents import ReadDocument

if TYPE_CHECKING:
    import numpy as np

from orchestrator.storage import engines as storage
from orchestrator.core.config import Settings
from orchestrator.llm.embeddings import Embedder, make_embedder
from .chunking import chunk_document

log = logging.getLogger(__name__)

RRF_K = 60
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="docs-search")
CANDIDATES = 50
_WORD = re.compile(r"\w+", re.UNICODE)


class DocsBase(DeclarativeBase):
    """Tables of docs_index.sqlite (kept apart from the jarvis database)."""


class Document(DocsBase):
    __tablename__ = "documents"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String, unique=True, index=True)  # absolute path or URL
    kind: Mapped[str] = mapped_column(String(16))
    title: Mapped[str | None] = mapped_column(String, nullable=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    source_tool: Mapped[str] = mapped_column(String(64))
    indexed_at: Mapped[datetime] = mapped_column()
    segments: Mapped[int] = mapped_column(Integer, default=0)  # pages of a PDF, paragraphs of a transcript
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)


class Chunk(DocsBase):
    __tablename__ = "chunks"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    page: Mapped[int | None] = mapped_column(Integer, nullable=True)
    start_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    text: Mapped[str] = mapped_column(Text)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)


class Meta(DocsBase):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String, primary_key=True)
    value: Mapped[str] = mapped_column(String)


_FTS_DDL = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, content='chunks', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, 'row')",
    "CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN "
    "INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN "
    "INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
]


@dataclass
class Hit:
    chunk_id: int
    document_id: int
    source: str
    kind: str
    title: str | None
    text: str
    page: int | None
    start_s: float | None
    score: float
    keyword_rank: int | None = None
    vector_rank: int | None = None

    @property
    def where(self) -> str:
        if self.page is not None:
            return f"p. {self.page}"
        if self.start_s is not None:
            s = int(self.start_s)
            return f"[{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}]" if s >= 3600 else f"[{s // 60:02d}:{s % 60:02d}]"
        return ""


@dataclass
class AddResult:
    document_id: int
    status: str  # added | updated | unchanged
    chunks: int
    vectors: int  # chunks that have a vector
    reused_vectors: int


TOKENIZER = "porter unicode61 remove_diacritics 2"
COMMON_SHARE = 0.2  # a query word found in more chunks than this is left out (a stop word, in effect)
KEEP_AT_LEAST = 2


class _Stemmer:
    """The index's own tokenizer (FTS5 porter) applied to query words, in a private in-memory database: the
    stems are what the index's vocabulary counts."""

    def __init__(self) -> None:
        import sqlite3

        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(f"CREATE VIRTUAL TABLE q USING fts5(w, tokenize='{TOKENIZER}')")
        self._db.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, 'instance')")
        self._lock = threading.Lock()

    def stems(self, words: list[str]) -> dict[int, str]:
        with self._lock:
            self._db.execute("DELETE FROM q")
            self._db.executemany("INSERT INTO q(rowid, w) VALUES (?, ?)", list(enumerate(words, 1)))
            return {int(doc) - 1: term for term, doc in self._db.execute("SELECT term, doc FROM qv")}


def _words(text_: str) -> list[str]:
    return [w for w in dict.fromkeys(_WORD.findall(text_.lower())) if len(w) > 1 or w.isdigit()]


def _match(words: list[str]) -> str | None:
    return " OR ".join('"' + w.replace('"', "") + '"' for w in words) if words else None


class DocsIndex:
    def __init__(self, settings: Settings, embedder: Embedder | None = None, engine: Engine | None = None):
        self.settings = settings
        self.embedder = embedder if embedder is not None else make_embedder(settings)
        self.engine = engine or _docs_engine(settings)
        self.chunk_chars = settings.docs.chunk_chars
        self._ready = False
        self._lock = threading.Lock()
        self._stemmer = _Stemmer()
        self._df: tuple[str, int, dict[str, int]] | None = None
        self._matrix: tuple[str, np.ndarray, np.ndarray] | None = None  # (generation, ids, vectors)

    # -- schema ----------------------------------------------------------------------------------
    def ensure(self) -> None:
        if self._ready:
            return
        with self._lock:
            if self._ready:
                return
            DocsBase.metadata.create_all(self.engine)
            with self.engine.begin() as conn:
                for ddl in _FTS_DDL:
                    conn.exec_driver_sql(ddl)
            self._ready = True

    def _bump(self, session: Session) -> None:
        """A new generation: other processes' vector caches see the index changed."""
        storage.bump_generation(session, Meta)

    def generation(self) -> str:
        with self.engine.connect() as conn:
            value = conn.exec_driver_sql("SELECT value FROM meta WHERE key = 'generation'").scalar()
            return value or "0"

    # -- documents -------------------------------------------------------------------------------
    def get(self, source: str) -> Document | None:
        self.ensure()
        with Session(self.engine, expire_on_commit=False) as s:
            return s.scalars(select(Document).where(Document.source == source)).first()

    def documents(self) -> list[Document]:
        self.ensure()
        with Session(self.engine, expire_on_commit=False) as s:
            return list(s.scalars(select(Document).order_by(Document.id)))

    def is_current(self, source: str, content_hash: str) -> bool:
        doc = self.get(source)
        return doc is not None and doc.content_hash == content_hash

    def add(self, doc: ReadDocument) -> AddResult:
        """Index (or re-index) one document. Unchanged content is skipped; on a change, chunks whose text is
        the same keep their vectors, so only what changed is embedded again."""
        import numpy as np

        self.ensure()
        chunks = chunk_document(doc, self.chunk_chars)
        with Session(self.engine, expire_on_commit=False) as s:
            existing = s.scalars(select(Document).where(Document.source == doc.source)).first()
            if existing is not None and existing.content_hash == doc.content_hash:
                vectors = s.scalar(select(func.count()).select_from(Chunk).where(
                    Chunk.document_id == existing.id, Chunk.embedding.is_not(None))) or 0
                return AddResult(existing.id, "unchanged", existing.chunk_count, vectors, 0)
            old_vectors: dict[str, bytes] = {}
            if existing is not None:
                for chunk_text, blob in s.execute(select(Chunk.text, Chunk.embedding).where(
                        Chunk.document_id == existing.id, Chunk.embedding.is_not(None))):
                    old_vectors[chunk_text] = blob
        blobs: list[bytes | None] = [old_vectors.get(c.text) for c in chunks]
        reused = sum(1 for b in blobs if b is not None)
        missing = [i for i, b in enumerate(blobs) if b is None]
        if missing:
            vectors = self.embedder.embed([chunks[i].text for i in missing])
            if vectors is not None:
                for i, vec in zip(missing, vectors):
                    blobs[i] = vec.astype(np.float32).tobytes()
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            existing = s.scalars(select(Document).where(Document.source == doc.source)).first()
            status = "added" if existing is None else "updated"
            if existing is None:
                existing = Document(source=doc.source, kind=doc.kind)
                s.add(existing)
            else:
                s.execute(delete(Chunk).where(Chunk.document_id == existing.id))
            existing.kind = doc.kind
            existing.title = doc.title
            existing.content_hash = doc.content_hash
            existing.source_tool = doc.source_tool
            existing.indexed_at = storage.utcnow().replace(tzinfo=None)  # the column is naive UTC
            existing.segments = len(doc.segments)
            existing.chunk_count = len(chunks)
            s.flush()
            if chunks:  # one executemany, not an ORM object per chunk
                s.execute(insert(Chunk), [{"document_id": existing.id, "position": c.position, "page": c.page,
                                           "start_s": c.start_s, "text": c.text, "embedding": blobs[i]}
                                          for i, c in enumerate(chunks)])
            self._bump(s)
            doc_id = existing.id
        log.info("indexed %s (%s): %d chunks", doc.source, status, len(chunks))
        return AddResult(doc_id, status, len(chunks), sum(1 for b in blobs if b is not None), reused)

    def remove(self, ref: str | int) -> Document | None:
        self.ensure()
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            query = select(Document)
            query = query.where(Document.id == int(ref)) if str(ref).isdigit() else query.where(Document.source == str(ref))
            doc = s.scalars(query).first()
            if doc is None:
                return None
            s.execute(delete(Chunk).where(Chunk.document_id == doc.id))
            s.delete(doc)
            self._bump(s)
            return doc

    def clear_vectors(self) -> None:
        """Drop every vector (after changing the embeddings model); `fill_missing_vectors` makes new ones."""
        self.ensure()
        with Session(self.engine) as s, s.begin():
            s.execute(update(Chunk).values(embedding=None))
            self._bump(s)

    def fill_missing_vectors(self) -> int:
        """Embed chunks indexed while no endpoint answered. Returns how many got a vector."""
        import numpy as np

        self.ensure()
        if not self.embedder.available():
            return 0
        done = 0
        while True:
            with Session(self.engine) as s:
                rows = s.execute(select(Chunk.id, Chunk.text).where(Chunk.embedding.is_(None)).limit(256)).all()
            if not rows:
                return done
            vectors = self.embedder.embed([r.text for r in rows])
            if vectors is None:
                return done
            with Session(self.engine) as s, s.begin():
                for row, vec in zip(rows, vectors):
                    s.execute(update(Chunk).where(Chunk.id == row.id).values(embedding=vec.astype(np.float32).tobytes()))
                self._bump(s)
            done += len(rows)

    # -- search ----------------------------------------------------------------------------------
    def informative_words(self, query: str) -> list[str]:
        """The query's words minus those that occur in most chunks: they barely change bm25's order but make
        SQLite score nearly every row ("the", "what", "about" in a question)."""
        words = _words(query)
        if len(words) <= KEEP_AT_LEAST:
            return words
        stems = self._stemmer.stems(words)
        total, df = self._doc_frequencies()
        ranked = sorted(range(len(words)), key=lambda i: df.get(stems.get(i, ""), 0))
        keep = [i for i in ranked if df.get(stems.get(i, ""), 0) <= COMMON_SHARE * total]
        if len(keep) < KEEP_AT_LEAST:
            keep = ranked[:KEEP_AT_LEAST]
        return [words[i] for i in sorted(keep)]

    def _doc_frequencies(self) -> tuple[int, dict[str, int]]:
        """Chunks per stemmed term (FTS5's vocabulary), read once per change of the index."""
        generation = self.generation()
        cached = self._df
        if cached is None or cached[0] != generation:
            with self.engine.connect() as conn:
                total = conn.exec_driver_sql("SELECT count(*) FROM chunks").scalar() or 0
                df = dict(conn.exec_driver_sql("SELECT term, doc FROM chunks_vocab").all())
            cached = self._df = (generation, total, df)
        return cached[1], cached[2]

    def keyword_ranking(self, query: str, limit: int = CANDIDATES, document_id: int | None = None) -> list[int]:
        self.ensure()
        match = _match(self.informative_words(query))
        if match is None:
            return []
        sql = "SELECT f.rowid FROM chunks_fts f"
        params: dict = {"m": match, "n": limit}
        if document_id is not None:
            sql += " JOIN chunks c ON c.id = f.rowid WHERE chunks_fts MATCH :m AND c.document_id = :d"
            params["d"] = document_id
        else:
            sql += " WHERE chunks_fts MATCH :m"
        sql += " ORDER BY bm25(chunks_fts) LIMIT :n"
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(text(sql), params)]

    def _vectors(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        import numpy as np

        generation = self.generation()
        cached = self._matrix
        if cached is None or cached[0] != generation:
            with self.engine.connect() as conn:
                rows = conn.execute(text("SELECT c.id, c.document_id, c.embedding FROM chunks c "
                                         "WHERE c.embedding IS NOT NULL")).all()
            if not rows:
                self._matrix = (generation, np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
                self._docs_of = np.zeros(0, dtype=np.int64)
            else:
                dims = len(rows[0][2]) // 4
                rows = [r for r in rows if len(r[2]) == dims * 4]  # vectors of another model are left out
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                self._docs_of = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
                matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dims)
                self._matrix = (generation, ids, matrix)
            cached = self._matrix
        if cached[1].size == 0:
            return None
        return cached[1], self._docs_of, cached[2]

    def vector_ranking(self, query: str, limit: int = CANDIDATES, document_id: int | None = None) -> list[int] | None:
        """Chunk ids by cosine similarity to the query, or None when vectors cannot be used now."""
        import numpy as np

        self.ensure()
        found = self._vectors()
        if found is None:
            return None
        vectors = self.embedder.embed([query])
        if vectors is None:
            return None
        ids, docs_of, matrix = found
        qvec = vectors[0]
        if qvec.shape[0] != matrix.shape[1]:
            log.warning("document index: the embeddings model changed (dimension %d, index has %d); run "
                        "`jarvis docs sync --reembed`", qvec.shape[0], matrix.shape[1])
            return None
        scores = matrix @ qvec
        if document_id is not None:
            scores = np.where(docs_of == document_id, scores, -np.inf)
        top = min(limit, len(scores))
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best])]
        return [int(ids[i]) for i in best if np.isfinite(scores[i])]

    def search(self, query: str, k: int = 5, document_id: int | None = None) -> list[Hit]:
        vector_job = None
        if self.embedder.cfg is not None:  # the vector side runs beside the keyword query (both release the GIL)
            vector_job = _POOL.submit(self.vector_ranking, query, CANDIDATES, document_id)
        keyword = self.keyword_ranking(query, CANDIDATES, document_id)
        vector = vector_job.result() if vector_job is not None else None
        fused = fuse(keyword, vector or [])
        top = fused[:k]
        if not top:
            return []
        krank = {cid: i + 1 for i, cid in enumerate(keyword)}
        vrank = {cid: i + 1 for i, cid in enumerate(vector or [])}
        by_id = self._hits([cid for cid, _ in top])
        return [Hit(**by_id[cid], score=score, keyword_rank=krank.get(cid), vector_rank=vrank.get(cid))
                for cid, score in top if cid in by_id]

    def first_chunks(self, document_id: int, k: int) -> list[Hit]:
        with Session(self.engine) as s:
            ids = list(s.scalars(select(Chunk.id).where(Chunk.document_id == document_id).order_by(Chunk.position)
                                 .limit(k)))
        by_id = self._hits(ids)
        return [Hit(**by_id[cid], score=0.0) for cid in ids]

    def _hits(self, chunk_ids: list[int]) -> dict[int, dict]:
        if not chunk_ids:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(select(Chunk.id, Chunk.document_id, Chunk.text, Chunk.page, Chunk.start_s, Document.source,
                                       Document.kind, Document.title).join(Document, Document.id == Chunk.document_id)
                                .where(Chunk.id.in_(chunk_ids))).all()
        return {r.id: {"chunk_id": r.id, "document_id": r.document_id, "text": r.text, "page": r.page,
                       "start_s": r.start_s, "source": r.source, "kind": r.kind, "title": r.title} for r in rows}

    def stats(self) -> dict[str, int]:
        self.ensure()
        with Session(self.engine) as s:
            return {"documents": s.scalar(select(func.count()).select_from(Document)) or 0,
                    "chunks": s.scalar(select(func.count()).select_from(Chunk)) or 0,
                    "vectors": s.scalar(select(func.count()).select_from(Chunk).where(Chunk.embedding.is_not(None))) or 0}


def fuse(*rankings: list[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: score(d) = sum over rankings of 1 / (k + rank of d)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, cid in enumerate(ranking, 1):
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def _docs_engine(settings: Settings) -> Engine:
    """docs_index.sqlite. FTS5 is SQLite's, so the index stays a SQLite file even when storage.url moves the
    other tables to PostgreSQL."""
    url = storage.database_url(settings, storage.DOCS_INDEX_DB)
    if not url.startswith("sqlite"):
        log.info("document index: kept in %s (full-text search needs SQLite's FTS5)",
                 storage.sqlite_path(settings, storage.DOCS_INDEX_DB))
        return storage.engine_for_url(f"sqlite:///{storage.sqlite_path(settings, storage.DOCS_INDEX_DB)}")
    return storage.engine_for(settings, storage.DOCS_INDEX_DB)

