"""Backups ([34]): `jarvis backup create` of a data folder with 1,000 threads, 10,000 memory facts and 10,000
document chunks, against copying the same files while Jarvis is stopped (target <= 2x; each run's ratio, the
copy, the backup and the synced copy interleaved); and a turn's latency while backups run in another process,
against none running (target <= 1.2x): the same scripted turn, each on a new thread, in blocks with and without
backups alternating, at low priority (the scheduled backup: niced, paced) and at normal priority (the CLI).
Zero-latency in-process model; SQLite. Medians with [min-max]: the machine may be shared."""

from __future__ import annotations

import random
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
from orchestrator.backup.sqlite_parts import find_databases, one_instant, snapshot
from orchestrator.memory.store import MemoryStore
from orchestrator.storage import writer
from orchestrator.storage.engines import dispose_all
from tests.fakes.instant_chat import InstantChatModel

THREADS, FACTS, DOCS, PAGES = 1000, 10_000, 100, 100
RUNS = 5
TURN_ROUNDS, TURNS_PER_BLOCK = 8, 60


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


# The copy runs in a process of its own, as with Jarvis stopped: this one has the databases open, and a copy
# closing its descriptors of them would drop this process's SQLite locks (a backup process could then take a
# database for unused and truncate its shared memory under this one's turns). Timed inside that process.
COPY = """
import os, shutil, sys, time
from pathlib import Path
source, dest, synced = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "synced"
shutil.rmtree(dest, ignore_errors=True)
start = time.perf_counter()
for path in sorted(source.rglob("*")):
    if path.is_file():
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        if synced:
            with open(target, "rb+") as f:
                os.fsync(f.fileno())
print(time.perf_counter() - start)
"""


def copy_s(settings, dest: Path, synced: bool = False) -> float:
    """Copy the data folder's files (databases and their WAL with them) with no Jarvis running; `synced`: each
    file synced to disk, as the backup's file is."""
    dispose_all()
    done = subprocess.run([sys.executable, "-c", COPY, str(settings.data_dir), str(dest),
                           "synced" if synced else "cached"], capture_output=True, text=True, check=True)
    return float(done.stdout)


def backup_api_s(settings, staging: Path) -> float:
    """Only the backup API's pass of a backup: every database copied from one instant's snapshots into a staging
    file (with the row counts the manifest takes, a few ms), with no archive, no sha256 and no sync. The floor under
    `backup_s` while every page goes through the backup API (never a file copy of a live database)."""
    databases = find_databases(settings.data_dir)
    start = time.perf_counter()
    with one_instant(databases) as sources:
        for db, src in zip(databases, sources):
            snapshot(db, staging, src)
            staging.unlink()
    return time.perf_counter() - start


def backup_s(settings, dest: Path, low_priority: bool = False) -> float:
    start = time.perf_counter()
    made = create_backup(settings, dest, low_priority=low_priority)
    took = time.perf_counter() - start
    made.path.unlink()
    return took


# Backups one after another while the parent says "go" on stdin, none after "stop" (the one under way ends
# first): a block of turns then runs with backups running, or with none, in the same process all along.
BACKUP_LOOP = """
import select, sys, time
sys.path.insert(0, {repo!r})
from orchestrator.core.config import settings_from_dict
from orchestrator.backup.create import create_backup
settings = settings_from_dict({data}, {base!r})
running = False
print("ready", flush=True)
while True:
    if select.select([sys.stdin], [], [], 0 if running else None)[0]:
        running = sys.stdin.readline().strip() == "go"
        print("going" if running else "stopped", flush=True)
    if running:
        create_backup(settings, {dest!r}, low_priority={low!r}).path.unlink()
"""


def turn_ms(graph, name: str, n: int) -> list[float]:
    """n times the same scripted turn, each on a new thread (a thread growing turn after turn would make the
    later turns slower whatever runs beside them)."""
    out = []
    for i in range(n):
        start = time.perf_counter()
        graph.invoke({"messages": [("user", "what is on today?")]}, {"configurable": {"thread_id": f"{name}-{i}"}})
        out.append((time.perf_counter() - start) * 1000)
    return out


def spread(values: list[float], unit: str = "") -> str:
    return f"median {statistics.median(values):.2f}{unit} [{min(values):.2f}-{max(values):.2f}]"


def turns_beside_backups(graph, loop: subprocess.Popen, rounds: int, per_block: int) -> list[tuple[float, float]]:
    """(idle median, busy median) per round: a block of turns with no backup running and a block while backups
    run, in alternating order, so that the machine's other load falls on both alike."""
    assert loop.stdin is not None and loop.stdout is not None
    assert loop.stdout.readline().strip() == "ready"

    def block(busy: bool, name: str) -> float:
        loop.stdin.write("go\n" if busy else "stop\n")
        loop.stdin.flush()
        assert loop.stdout.readline().strip() == ("going" if busy else "stopped")
        return statistics.median(turn_ms(graph, name, per_block))

    out = []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {busy: block(busy, f"{'busy' if busy else 'idle'}-{loop.pid}-{r}") for busy in order}
        out.append((got[False], got[True]))
    block(False, f"end-{loop.pid}")
    return out


def main() -> None:
    settings, base = isolated_settings()
    fill(settings)
    dispose_all()
    dbs = find_databases(settings.data_dir)
    print(f"data folder: {folder_mb(settings.data_dir):.1f} MB, databases {', '.join(p.name for p in dbs)}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-backup-") as tmp:
        copies, backups, synced, api = [], [], [], []
        for _ in range(RUNS):  # interleaved, so that the machine's other load falls on each alike
            copies.append(copy_s(settings, Path(tmp) / "copy"))
            backups.append(backup_s(settings, Path(tmp) / "backups"))
            synced.append(copy_s(settings, Path(tmp) / "synced", synced=True))
            api.append(backup_api_s(settings, Path(tmp) / "staging.sqlite"))
        ratios = [b / c for b, c in zip(backups, copies)]
        synced_ratios = [b / c for b, c in zip(backups, synced)]
        print(f"copy with Jarvis stopped: {spread(copies, ' s')}; with each file synced to disk: "
              f"{spread(synced, ' s')}; backup create while it could run: {spread(backups, ' s')}", flush=True)
        ratio = statistics.median(ratios)
        print(f"backup / copy, per run: {spread(ratios, 'x')} (target <= 2x) {'OK' if ratio <= 2 else 'ABOVE TARGET'}"
              f"; backup / synced copy: {spread(synced_ratios, 'x')}", flush=True)
        print(f"the backup API's pass alone (no archive, hash or sync): {spread(api, ' s')}, per run "
              f"{spread([a / c for a, c in zip(api, copies)], 'x')} the copy: the floor under a backup that copies "
              f"every page through the backup API", flush=True)

        graph = build_graph(settings, llm=InstantChatModel(responder=lambda m: AIMessage(content="ok")))
        turn_ms(graph, "warm", 10)
        data = {"storage": {"data_dir": str(settings.data_dir)}, "fs": {"roots": [str(base / "root")]},
                "tools_dir": str(base / "tools"), "mcp": {"dir": str(base / "mcp")}, "sandbox": {"required": False}}
        # As `jarvis backup create` makes it (normal priority), and as the scheduled backup and Settings' button
        # make it (low priority: a niced thread pausing between steps).
        for low, how in ((True, "at low priority, as scheduled"), (False, "at normal priority, as the CLI")):
            loop = subprocess.Popen([sys.executable, "-c", BACKUP_LOOP.format(
                repo=str(REPO), data=repr(data), base=str(base), dest=str(Path(tmp) / "bg"), low=low)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                rounds = turns_beside_backups(graph, loop, TURN_ROUNDS, TURNS_PER_BLOCK)
            finally:
                loop.kill()
                loop.wait()
            slow = [busy / idle for idle, busy in rounds]
            print(f"turn with no backup running: {spread([i for i, _ in rounds], ' ms')}; while backups run in "
                  f"another process {how}: {spread([b for _, b in rounds], ' ms')} (medians of {TURN_ROUNDS} "
                  f"interleaved blocks of {TURNS_PER_BLOCK} turns); ratio per block pair {spread(slow, 'x')} "
                  f"(target <= 1.2x) {'OK' if statistics.median(slow) <= 1.2 else 'ABOVE TARGET'}", flush=True)
        low_backups = [backup_s(settings, Path(tmp) / "backups", low_priority=True) for _ in range(RUNS)]
        print(f"backup create at low priority (as scheduled): {spread(low_backups, ' s')}, "
              f"{statistics.median(low_backups) / statistics.median(copies):.2f}x the copy")


if __name__ == "__main__":
    main()
