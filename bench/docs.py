"""Document index benchmark: indexing throughput (pages/s) against pdf_extract_text alone on the same files
(target >= 0.8x), and search latency over 10,000 chunks (target <= 20 ms), keyword-only and hybrid.

Hybrid search uses an in-process embedder (deterministic vectors, 384 dimensions) so the figure is the index's
own work; with a real endpoint, add one /v1/embeddings round trip for the query.

    .venv/bin/python bench/docs.py
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from orchestrator.core.config import settings_from_dict  # noqa: E402
from orchestrator.llm.embeddings import Embedder  # noqa: E402


class LocalEmbedder(Embedder):
    """Deterministic bag-of-words vectors computed in process (no network)."""

    def __init__(self, dims: int = 384):
        super().__init__(None)
        self.dims = dims
        self.cfg = type("Cfg", (), {"model": "local", "base_url": "in-process"})()  # marks vectors as available

    def available(self) -> bool:
        return True

    def embed(self, texts):
        from tests.fakes.llm_server import embed_text

        return [np.asarray(embed_text(t, self.dims), dtype=np.float32) for t in texts]


def settings_in(folder: Path):
    return settings_from_dict({"storage": {"data_dir": str(folder / "data")}, "fs": {"roots": [str(folder)]}}, folder)


def extract_all(files: list[Path]) -> int:
    from integrations.pdf_tools import build_pdf_tools

    tool = next(t for t in build_pdf_tools([files[0].parent], max_extract_chars=10**9) if t.name == "pdf_extract_text")
    for f in files:
        tool.invoke({"path": str(f)})
    return len(files)


def index_all(files: list[Path], folder: Path) -> int:
    from orchestrator.docs_index import DocsIndex
    from orchestrator.docs_index.files import add_paths

    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        index = DocsIndex(settings_in(Path(tmp)), embedder=Embedder(None))
        report = add_paths(index, files)
        index.engine.dispose()
        return report.pages


def indexing(folder: Path) -> None:
    from tests.fakes.pdfs import write_pdf

    files = [write_pdf(folder / f"report_{i}.pdf", 200, 40) for i in range(3)]
    pages = 600
    extract_all(files[:1]), index_all(files[:1], folder)  # warm up
    best_extract = best_index = float("inf")
    for _ in range(5):  # interleaved, so that load from other processes hits both alike
        start = time.perf_counter()
        extract_all(files)
        best_extract = min(best_extract, time.perf_counter() - start)
        start = time.perf_counter()
        assert index_all(files, folder) == pages
        best_index = min(best_index, time.perf_counter() - start)
    ratio = best_extract / best_index
    print(f"indexing: {pages / best_index:.1f} pages/s; pdf_extract_text alone: {pages / best_extract:.1f} pages/s; "
          f"ratio {ratio:.2f} (target >= 0.8) {'OK' if ratio >= 0.8 else 'BELOW TARGET'}")


def search_latency(folder: Path) -> None:
    from integrations.documents import ReadDocument, Segment
    from orchestrator.docs_index import DocsIndex

    rng = random.Random(7)
    vocabulary = [f"{a}{b}" for a in ("re", "con", "pro", "de", "in", "ex", "per", "sub") for b in
                  ("port", "duct", "tain", "sign", "form", "vert", "ject", "mit", "cess", "fer", "pose", "tract")]
    vocabulary += [f"term{i}" for i in range(4000)]
    weights = [1.0 / (i + 1) for i in range(len(vocabulary))]  # Zipf-like, as in real text

    def sentence() -> str:
        return " ".join(rng.choices(vocabulary, weights, k=14)).capitalize() + "."

    index = DocsIndex(settings_in(folder), embedder=LocalEmbedder())
    start = time.perf_counter()
    for d in range(100):  # 100 documents of 100 pages, one chunk a page: 10,000 chunks
        segments = [Segment(text=" ".join(sentence() for _ in range(12)), page=p + 1) for p in range(100)]
        index.add(ReadDocument(kind="pdf", source=f"/bench/doc{d}.pdf", title=f"doc {d}", content_hash=str(d),
                               source_tool="bench", segments=segments))
    stats = index.stats()
    print(f"built an index of {stats['chunks']} chunks ({stats['vectors']} with vectors) in "
          f"{time.perf_counter() - start:.1f} s")
    # Queries shaped like questions: a few very common words ("what", "the", "about"...) and two or three
    # content words from the rest of the vocabulary.
    common, content = vocabulary[:30], vocabulary[100:]
    queries = [" ".join(rng.sample(common, 3) + rng.sample(content, rng.randint(2, 3))) for _ in range(60)]
    index.search(queries[0], 5)  # warm up: the vector matrix is loaded once per index change

    def timed(fn) -> list[float]:
        out = []
        for q in queries:
            t = time.perf_counter()
            fn(q)
            out.append((time.perf_counter() - t) * 1000)
        return out

    keyword = timed(lambda q: index.keyword_ranking(q))
    hybrid = timed(lambda q: index.search(q, 5))
    for name, times in (("keyword only", keyword), ("hybrid (keyword + vectors, RRF)", hybrid)):
        p50, p95 = statistics.median(times), sorted(times)[int(len(times) * 0.95) - 1]
        print(f"search {name} over {stats['chunks']} chunks: median {p50:.1f} ms, p95 {p95:.1f} ms "
              f"(target <= 20 ms) {'OK' if p50 <= 20 else 'ABOVE TARGET'}")
    index.engine.dispose()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "idx").mkdir()
        (folder / "search").mkdir()
        indexing(folder / "idx")
        search_latency(folder / "search")


if __name__ == "__main__":
    main()
