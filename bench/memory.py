"""Memory benchmark ([21]): what the planner's memory read costs and finds as the memory grows.

  - latency of `MemoryStore.relevant` (the read before every planner step) at 10,000 and 100,000 facts,
    keyword-only and hybrid (target: median <= 20 ms; the anchor is that target);
  - recall@10 on a generated set of people and projects, asked by paraphrased questions held apart from the facts'
    wording ("What does Maria Okafor like to eat?" for "Maria Okafor's favourite food is dumplings"), and by
    questions that name only the project;
  - recall@10 for questions that name no entity ("Who has a gecko named Biscuit?" for "Maria Okafor keeps a gecko
    called Biscuit": found by the words they share, since the bench's embedder knows no synonyms), and for "Who
    likes dumplings?", which hundreds of facts answer, the share of the ten facts shown that answer it;
  - the planner prompt's extra tokens per turn (target: flat as the memory grows: at the largest memory at most
    1.1 times the smallest's, and within memory.prompt_token_budget).
Each figure is printed with its ratio to the target and OK / MISSED (recall@10 target: 0.9 for the held-apart
questions).

Hybrid uses the in-process embedder of bench/docs.py (deterministic bag-of-words vectors, 384 dimensions), so the
figure is the store's own work; with a real endpoint add one /v1/embeddings round trip per turn.

    .venv/bin/python bench/memory.py [--quick | --sizes 1000,2000]     (--quick: 10,000 facts only)
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from _common import isolated_settings, report  # noqa: E402  (bench/ is the script's folder)
from docs import LocalEmbedder  # noqa: E402

from integrations.summarize import estimate_tokens  # noqa: E402
from orchestrator.memory import MemoryStore  # noqa: E402
from orchestrator.memory.context import memory_context  # noqa: E402
from orchestrator.memory.models import MemoryEntity, MemoryFact, SourceKind  # noqa: E402
from orchestrator.storage import engines as storage  # noqa: E402

FIRST = ("Maria Ahmed Chen Olga Tariq Ines Kofi Yuki Lars Priya Mateo Aisha Bruno Hana Omar Lena Diego Sofia Ivan "
         "Nadia Felix Amara Jonas Leila Pavel Zara Hugo Mei Ravi Elif").split()
LAST = ("Okafor Lindqvist Moreau Tanaka Novak Haddad Silva Kowalski Mensah Ferreira Ito Jensen Rossi Petrov Nakamura "
        "Costa Schmidt Dubois Yilmaz Kim Garcia Nowak Berg Santos Fischer Park Ali Weber Horvat Ortiz").split()
FOODS = "dumplings paella ramen falafel pierogi sushi tacos risotto curry borscht goulash pho".split()
CITIES = "Lisbon Porto Oslo Kyoto Lagos Quito Riga Graz Hanoi Perth Bergen Leeds".split()
EMPLOYERS = "Acme Globex Initech Umbrella Hooli Stark Wayne Tyrell Cyberdyne Wonka".split()
MONTHS = "January February March April May June July August September October November December".split()
ANIMALS = "iguana parrot tortoise ferret hamster rabbit gecko goldfish canary hedgehog".split()
PET_NAMES = ("Biscuit Pickle Noodle Waffle Pepper Mango Clover Pretzel Nacho Truffle Bramble Sprout Dumpling Fudge "
             "Juniper Marble Nutmeg Pebble Quill Tofu Wasabi Zephyr Basil Cobalt Ember").split()
PROJECTS = ("Falcon Heron Osprey Kestrel Condor Puffin Ibis Plover Egret Wren Finch Lark Swift Rook Crane Stork "
            "Merlin Hobby Harrier Kite").split()


def generate(n_facts: int, rng: random.Random):
    """(entities, facts, held-apart queries, queries that name no entity, many-answer queries). A person has 4
    facts, a project 4; names are unique. Every 25th person also keeps a pet whose kind and name together are
    found in no other fact ("Maria Okafor keeps a gecko called Biscuit"), asked for without the owner's name
    ("Who has a gecko named Biscuit?"): one right fact. "Who likes dumplings?" has hundreds of right facts: the
    share of the ten shown that are right is measured for it."""
    people = [f"{a} {b}" for a in FIRST for b in LAST]
    rng.shuffle(people)
    projects = [f"Project {p} {i}" for i in range(1000) for p in PROJECTS]
    entities, facts, queries, unnamed = [], [], [], []
    pets = [(a, p) for p in PET_NAMES for a in ANIMALS]
    rng.shuffle(pets)
    n_entities = n_facts // 4
    for e in range(n_entities):
        if e % 5 == 4:  # every fifth entity a project
            name = projects[e // 5 % len(projects)] if e // 5 < len(projects) else f"Project X{e}"
            kind = "project"
            owner = people[e % len(people)]
            rows = [f"{name} is due at the end of {rng.choice(MONTHS)}",
                    f"{name} is led by {owner}",
                    f"{name} has a budget of {rng.randint(5, 900)} thousand euros",
                    f"{name} status meetings are on {rng.choice(['Mondays', 'Tuesdays', 'Thursdays'])}"]
            asked = [(f"When is the deadline for {name}?", 0), (f"How much money does {name} have?", 2)]
        else:
            name = people[e % len(people)] + ("" if e < len(people) else f" {e // len(people)}")
            kind = "person"
            food, city = rng.choice(FOODS), rng.choice(CITIES)
            rows = [f"{name}'s favourite food is {food}", f"{name} lives in {city}",
                    f"{name} works at {rng.choice(EMPLOYERS)}", f"{name}'s birthday is in {rng.choice(MONTHS)}"]
            asked = [(f"What does {name} like to eat?", 0), (f"Which town is {name} based in?", 1),
                     (f"Who employs {name}?", 2)]
        if kind == "person" and e % 25 == 0 and pets:
            animal, pet = pets.pop()
            rows.append(f"{name} keeps a {animal} called {pet}")
            unnamed.append((f"Who has a {animal} named {pet}?", len(facts) + len(rows) - 1))
        entities.append((kind, name))
        start = len(facts)
        facts += [(e, row) for row in rows]
        question, which = rng.choice(asked)
        queries.append((question, start + which))
    many = [(f"Who likes {food}?", f"favourite food is {food}") for food in FOODS]
    return entities, facts, queries, unnamed, many


def load(store: MemoryStore, entities, facts) -> None:
    """Bulk rows through the store's engine (the FTS triggers run as for any insert); one transaction."""
    import numpy as np
    from sqlalchemy import insert

    from orchestrator.memory.store import name_key

    store.ensure()
    now = storage.utcnow()
    with store.engine.begin() as conn:
        conn.execute(insert(MemoryEntity), [{"id": i + 1, "kind": k, "name": n, "name_key": name_key(n),
                                             "created_at": now} for i, (k, n) in enumerate(entities)])
        batch = []
        for fid, (e, fact) in enumerate(facts, 1):
            search_text = f"{entities[e][1]}: {fact}"
            vec = store.embedder.embed([search_text]) if store.embedder.cfg is not None else None
            batch.append({"id": fid, "entity_id": e + 1, "text": fact, "search_text": search_text,
                          "source_kind": SourceKind.USER, "source_ref": "bench", "trusted": True, "learned_at": now,
                          "confirmed_at": now, "embedding": vec[0].astype(np.float32).tobytes() if vec else None})
            if len(batch) == 5000:
                conn.execute(insert(MemoryFact), batch)
                batch = []
        if batch:
            conn.execute(insert(MemoryFact), batch)
    with store._session() as s, s.begin():
        store._bump(s)


def run(n_facts: int, hybrid: bool, rng_seed: int = 7) -> dict[str, float]:
    settings, _ = isolated_settings()
    store = MemoryStore(settings, embedder=LocalEmbedder() if hybrid else None)
    if not hybrid:
        store.embedder.cfg = None
    entities, facts, queries, unnamed, many = generate(n_facts, random.Random(rng_seed))
    t0 = time.perf_counter()
    load(store, entities, facts)
    load_s = time.perf_counter() - t0
    sample = random.Random(1).sample(queries, 200)
    store.relevant(sample[0][0])  # warm: the vector matrix is read once per change of the memory
    latencies, cpu, hits, tokens = [], [], 0, []
    for question, target in sample:
        t, c = time.perf_counter(), time.process_time()
        found = store.relevant(question, 10)
        latencies.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)  # all threads' CPU: less swayed by other work on the machine
        hits += any(f.id == target + 1 for f in found)
    unnamed_hits, unnamed_ms = 0, []
    for question, target in unnamed:
        t = time.perf_counter()
        found = store.relevant(question, 10)
        unnamed_ms.append((time.perf_counter() - t) * 1000)
        unnamed_hits += any(f.id == target + 1 for f in found)
    right = []
    for question, says in many:
        right.append(sum(says in f.text for f in store.relevant(question, 10)) / 10)
    for question, _ in sample[:50]:
        tokens.append(estimate_tokens(memory_context(store, question, settings.memory) or ""))
    storage.dispose_all()
    return {"facts": len(facts), "load_s": load_s, "median_ms": statistics.median(latencies),
            "p95_ms": sorted(latencies)[int(len(latencies) * 0.95)], "cpu_median_ms": statistics.median(cpu),
            "recall_at_10": hits / len(sample),
            "recall_at_10_no_name": unnamed_hits / len(unnamed), "no_name_queries": len(unnamed),
            "no_name_median_ms": statistics.median(unnamed_ms),
            "right_share_of_10_many_answers": statistics.mean(right), "prompt_tokens": statistics.mean(tokens)}


RECALL_TARGET = 0.9  # held-apart questions: the right fact among the ten shown, nine times in ten
FLAT_TARGET = 1.1  # prompt tokens at the largest memory / at the smallest: flat, not growing with the memory


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    sizes = [10_000] if "--quick" in argv else [10_000, 100_000]
    if "--sizes" in argv:  # e.g. --sizes 1000,2000 (a quick look; at least 1,000 facts: 200 questions are asked)
        sizes = [int(n) for n in argv[argv.index("--sizes") + 1].split(",")]
    budget = isolated_settings()[0].memory.prompt_token_budget
    worst, worst_recall, tokens = 0.0, 1.0, {}
    for n in sizes:
        for hybrid in (False, True):
            figures = run(n, hybrid)
            name = f"memory {n} facts, {'hybrid' if hybrid else 'keywords'}"
            worst = max(worst, figures["median_ms"])
            worst_recall = min(worst_recall, figures["recall_at_10"])
            tokens.setdefault(hybrid, []).append(figures["prompt_tokens"])
            report(name, figures, figures["median_ms"] / 20.0,
                   "median <= 20 ms: ratio <= 1", figures["median_ms"] <= 20.0)
            print(f"  recall@10 {figures['recall_at_10']:.3f}: ratio to the target {RECALL_TARGET} "
                  f"{figures['recall_at_10'] / RECALL_TARGET:.3f} (target >= 1) -> "
                  f"{'OK' if figures['recall_at_10'] >= RECALL_TARGET else 'MISSED'}")
    for hybrid, per_size in tokens.items():
        growth = max(per_size) / max(min(per_size), 1e-9)
        within = max(per_size) <= budget
        print(f"[memory prompt tokens per turn, {'hybrid' if hybrid else 'keywords'}] "
              f"{', '.join(f'{t:.0f} at {n:,} facts' for t, n in zip(per_size, sizes))} (budget {budget})")
        print(f"  ratio largest / smallest memory {growth:.3f} (target <= {FLAT_TARGET}: flat as memory grows, "
              f"and within the budget) -> {'OK' if growth <= FLAT_TARGET and within else 'MISSED'}")
    print(f"[memory] worst median {worst:.2f} ms, ratio to the 20 ms anchor {worst / 20.0:.3f}; "
          f"worst recall@10 {worst_recall:.3f} (target >= {RECALL_TARGET})")


if __name__ == "__main__":
    main()
