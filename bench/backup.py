"""Backups ([34]): `jarvis backup create` of a data folder with 1,000 threads, 10,000 memory facts and 10,000
document chunks, against copying the same files while Jarvis is stopped (target <= 2x); and a turn's latency
while backups run in another process, against idle (target <= 1.2x). Zero-latency in-process model; SQLite."""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, isolated_settings

from langchain_core.messages import AIMessage

from orchestrator.app import build_graph
from orchestrator.backup.create import create_backup
from orchestrator.backup.sqlite_parts import find_databases
from orchestrator.memory.store import MemoryStore
from orchestrator.storage import writer
from orchestrator.storage.engines import dispose_all
from tests.fakes.instant_chat import InstantChatModel

THREADS, FACTS, DOCS, PAGES = 1000, 10_000, 100, 100
RUNS = 3


def fill(settings) -> None:
    import memory as memory_bench
    from docs import LocalEmbedder

    from integrations.documents import ReadDocument, Segment
    from orchestrator.docs_index import DocsIndex

    start = time.perf_counter()
    noted = InstantChatModel(responder=lambda m: AIMessage(content=f"Noted: {m[-1].content}"))
    graph = build_graph(settings, llm=noted)
    for t in range(THREADS):
        graph.invoke({"messages": [("user", f"thread {t}: remember the number {t}")]},
                     {"configurable": {"thread_id": f"t{t}"}})
    entities, facts, *_ = memory_bench.generate(FACTS, random.Random(7))
    memory_bench.load(MemoryStore(settings), entities, facts)
    index = DocsIndex(settings, embedder=LocalEmbedder())
    rng = random.Random(7)
    words = [f"term{i}" for i in range(4000)]

    def sentence() -> str:
        return " ".join(rng.choices(words, k=14)).capitalize() + "."

    for d in range(DOCS):
        segments = [Segment(text=" ".join(sentence() for _ in range(12)), page=p + 1) for p in range(PAGES)]
        index.add(ReadDocument(kind="pdf", source=f"/bench/doc{d}.pdf", title=f"doc {d}", content_hash=str(d),
                               source_tool="bench", segments=segments))
    writer.flush()
    print(f"filled: {THREADS} threads, {len(facts)} memory facts, {index.stats()['chunks']} chunks in "
          f"{time.perf_counter() - start:.0f} s")


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def cold_copy(settings, dest: Path) -> float:
    """Copy the data folder's files (databases and their WAL with them) with no Jarvis running."""
    dispose_all()
    shutil.rmtree(dest, ignore_errors=True)
    start = time.perf_counter()
    shutil.copytree(settings.data_dir, dest)
    return time.perf_counter() - start


def synced_copy(settings, dest: Path) -> float:
    """The same copy, each file synced to disk as the backup's file is."""
    dispose_all()
    shutil.rmtree(dest, ignore_errors=True)
    start = time.perf_counter()
    for path in Path(settings.data_dir).rglob("*"):
        if path.is_file():
            target = dest / path.relative_to(settings.data_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            with open(target, "rb+") as f:
                os.fsync(f.fileno())
    return time.perf_counter() - start


def backup_s(settings, dest: Path, low_priority: bool = False) -> float:
    start = time.perf_counter()
    made = create_backup(settings, dest, low_priority=low_priority)
    took = time.perf_counter() - start
    made.path.unlink()
    return took


BACKUP_LOOP = """
import sys, time
sys.path.insert(0, {repo!r})
from orchestrator.core.config import settings_from_dict
from orchestrator.backup.create import create_backup
settings = settings_from_dict({data}, {base!r})
while True:
    create_backup(settings, {dest!r}, low_priority={low!r}).path.unlink()
"""


def turn_ms(graph, thread: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        graph.invoke({"messages": [("user", f"message {i}")]}, {"configurable": {"thread_id": thread}})
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    settings, base = isolated_settings()
    fill(settings)
    dispose_all()
    dbs = find_databases(settings.data_dir)
    print(f"data folder: {folder_mb(settings.data_dir):.1f} MB, databases {', '.join(p.name for p in dbs)}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-backup-") as tmp:
        copies = [cold_copy(settings, Path(tmp) / "copy") for _ in range(RUNS)]
        backups = [backup_s(settings, Path(tmp) / "backups") for _ in range(RUNS)]
        synced = [synced_copy(settings, Path(tmp) / "synced") for _ in range(RUNS)]
        copy, backup, sync = statistics.median(copies), statistics.median(backups), statistics.median(synced)
        ratio = backup / copy
        print(f"copy with Jarvis stopped: median {copy:.2f} s ({sync:.2f} s with each file synced to disk); backup "
              f"create while it could run: median {backup:.2f} s; ratio {ratio:.2f}x (target <= 2x) "
              f"{'OK' if ratio <= 2 else 'ABOVE TARGET'}; {backup / sync:.2f}x the synced copy", flush=True)

        graph = build_graph(settings, llm=InstantChatModel(responder=lambda m: AIMessage(content="ok")))
        turn_ms(graph, "warm", 5)
        idle = statistics.median(turn_ms(graph, "idle", 40))
        data = {"storage": {"data_dir": str(settings.data_dir)}, "fs": {"roots": [str(base / "root")]},
                "tools_dir": str(base / "tools"), "mcp": {"dir": str(base / "mcp")}, "sandbox": {"required": False}}
        # As `jarvis backup create` makes it (normal priority), and as the scheduled backup and Settings' button
        # make it (a thread of lower priority).
        for low, how in ((True, "at low priority, as scheduled"), (False, "at normal priority")):
            loop = subprocess.Popen([sys.executable, "-c", BACKUP_LOOP.format(
                repo=str(REPO), data=repr(data), base=str(base), dest=str(Path(tmp) / "bg"), low=low)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(1.0)  # the first backup is under way
                busy = statistics.median(turn_ms(graph, f"busy-{low}", 40))
            finally:
                loop.kill()
                loop.wait()
            slow = busy / idle
            print(f"turn while idle: median {idle:.1f} ms; while backups run in another process {how}: median "
                  f"{busy:.1f} ms; ratio {slow:.2f}x (target <= 1.2x) {'OK' if slow <= 1.2 else 'ABOVE TARGET'}",
                  flush=True)
        low_backups = [backup_s(settings, Path(tmp) / "backups", low_priority=True) for _ in range(RUNS)]
        print(f"backup create at low priority (as scheduled): median {statistics.median(low_backups):.2f} s, "
              f"{statistics.median(low_backups) / copy:.2f}x the copy")


if __name__ == "__main__":
    main()
