"""PDF benchmark: pages per second of pdf_extract_text against plain pypdf on the same 500-page file
(target ratio >= 0.9), and peak memory of pdf_summarize at 50, 500 and 2000 pages (target: flat in page
count, under 300 MB). Summaries use a zero-latency in-process chat model, so only Jarvis's own work counts.

    .venv/bin/python bench/pdf.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LINES_PER_PAGE = 40  # ~3,800 characters a page, a dense report


def plain_pypdf(path: Path) -> int:
    from pypdf import PdfReader

    chars = 0
    for page in PdfReader(path).pages:
        chars += len(page.extract_text() or "")
    return chars


def jarvis_extract(path: Path) -> int:
    from integrations.pdf_tools import build_pdf_tools

    tool = next(t for t in build_pdf_tools([path.parent], max_extract_chars=10**9) if t.name == "pdf_extract_text")
    return len(tool.invoke({"path": str(path)}))


def best_times(fns, path: Path, runs: int) -> list[float]:
    """Best wall time of each function, runs interleaved so that load from other processes hits both alike."""
    best = [float("inf")] * len(fns)
    for _ in range(runs):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn(path)
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def summarize_peak(path: str) -> dict:
    """Run in a child process: RSS before and at the peak of one pdf_summarize."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from integrations.pdf_tools import build_pdf_tools

    model = FakeListChatModel(responses=["Notes: the committee reviewed the quarterly figures (p. 1). " * 8])
    tool = next(t for t in build_pdf_tools([Path(path).parent], model, max_summary_chunks=10**6)
                if t.name == "pdf_summarize")
    tool.invoke({"path": path, "pages": "1"})  # warm up imports and caches
    import threading

    before = _rss_mb()
    peak = [before]
    running = threading.Event()
    running.set()

    def sample() -> None:  # the resident size sampled during the call (ru_maxrss would include import peaks)
        while running.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    out = tool.invoke({"path": path})
    seconds = time.perf_counter() - start
    running.clear()
    sampler.join()
    peak[0] = max(peak[0], _rss_mb())
    return {"before_mb": round(before, 1), "peak_mb": round(peak[0], 1), "seconds": round(seconds, 2), "chars": len(out)}


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:  # not Linux: the high-water mark is the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--summarize-peak":
        print(json.dumps(summarize_peak(sys.argv[2])))
        return
    from tests.fakes.pdfs import write_pdf

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = {n: write_pdf(folder / f"report_{n}.pdf", n, LINES_PER_PAGE) for n in (50, 500, 2000)}
        big = files[500]

        plain_pypdf(files[50]), jarvis_extract(files[50])  # warm up
        t_plain, t_ours = best_times([plain_pypdf, jarvis_extract], big, 5)
        ratio = t_plain / t_ours
        print(f"pdf_extract_text: {500 / t_ours:.1f} pages/s; plain pypdf: {500 / t_plain:.1f} pages/s; "
              f"ratio {ratio:.2f} (target >= 0.9) {'OK' if ratio >= 0.9 else 'BELOW TARGET'}")

        peaks = {}
        for n, path in files.items():
            proc = subprocess.run([sys.executable, __file__, "--summarize-peak", str(path)], capture_output=True,
                                  text=True, check=True)
            peaks[n] = json.loads(proc.stdout.strip().splitlines()[-1])
            p = peaks[n]
            print(f"pdf_summarize {n:5d} pages: peak RSS {p['peak_mb']:.0f} MB (before {p['before_mb']:.0f} MB, "
                  f"+{p['peak_mb'] - p['before_mb']:.0f} MB) in {p['seconds']:.1f} s")
        growth = peaks[2000]["peak_mb"] - peaks[50]["peak_mb"]
        worst = max(p["peak_mb"] for p in peaks.values())
        print(f"pdf_summarize peak memory: {worst:.0f} MB at most (target < 300 MB) "
              f"{'OK' if worst < 300 else 'ABOVE TARGET'}; growth from 50 to 2000 pages: {growth:+.0f} MB "
              f"({growth / 1950 * 1024:.1f} KB a page)")


if __name__ == "__main__":
    main()
