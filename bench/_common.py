"""Helpers shared by the benchmarks: an isolated Jarvis home and timing."""

from __future__ import annotations

import atexit
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _remove(base: Path) -> None:
    from orchestrator.storage import writer

    writer.flush()  # the bookkeeping still queued goes to this folder's databases first
    shutil.rmtree(base, ignore_errors=True)


def isolated_settings(**overrides):
    """Settings with a fresh data dir and file root in a temporary folder."""
    from orchestrator.core.config import settings_from_dict

    base = Path(tempfile.mkdtemp(prefix="jarvis-bench-"))
    atexit.register(_remove, base)  # a bench run left one folder per call behind
    (base / "root").mkdir()
    data = {"storage": {"data_dir": str(base / "data")}, "fs": {"roots": [str(base / "root")]},
            "tools_dir": str(base / "tools"), "mcp": {"dir": str(base / "mcp")}, "sandbox": {"required": False}}
    for key, value in overrides.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return settings_from_dict(data, base), base


def median_ms(fn: Callable[[int], object], runs: int, warmup: int = 3) -> float:
    for i in range(warmup):
        fn(-1 - i)
    samples = []
    for i in range(runs):
        t0 = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def interleaved_medians(a: Callable[[int], object], b: Callable[[int], object], runs: int, warmup: int = 3) -> tuple[float, float]:
    """Median ms of a and of b, run alternately so that background load hits both alike."""
    for i in range(warmup):
        a(-1 - i)
        b(-1 - i)
    sa, sb = [], []
    for i in range(runs):
        for fn, samples in ((a, sa), (b, sb)) if i % 2 == 0 else ((b, sb), (a, sa)):
            t0 = time.perf_counter()
            fn(i)
            samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(sa), statistics.median(sb)


def report(name: str, figures: dict[str, float], ratio: float, target: str, ok: bool) -> None:
    print(f"[{name}]")
    for k, v in figures.items():
        print(f"  {k}: {v:.2f}")
    print(f"  ratio: {ratio:.3f} (target {target}) -> {'OK' if ok else 'MISSED'}")
