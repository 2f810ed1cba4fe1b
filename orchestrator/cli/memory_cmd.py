"""`jarvis memory list|show|search|forget|export|import|proposals|accept|reject`: what Jarvis remembers about you, yours to read, move and
delete (orchestrator/memory/)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from orchestrator.cli import fail, say, state
from orchestrator.core.visible import visible_json
from orchestrator.core import json_bounds

memory_app = typer.Typer(help="What Jarvis remembers about you: people, projects, facts, and where each came from.",
                         no_args_is_help=True)


def _store(ctx: typer.Context) -> Any:
    store = state(ctx).app().memory
    if store is None:
        fail("memory is turned off (memory.enabled: false in the config)")
    return store


LATEST_FACTS_SHOWN = 20  # under the entities in `jarvis memory list`


def _fact_line(f: Any) -> str:
    about = f"{f.entity} ({f.entity_kind}): " if f.entity else ""
    mark = "" if f.trusted else "  [from outside content]"
    read = f"\n        {f.source_detail}" if not f.trusted and f.source_detail else ""  # what the thread had read
    return f"m{f.id:<6} {about}{f.text}\n        {f.source}{mark}{read}"


@memory_app.command("list")
def list_(ctx: typer.Context, kind: str = typer.Option(None, "--kind", help="only entities of this kind"),
          facts: bool = typer.Option(False, "--facts", help="list the facts instead of the entities"),
          limit: int = typer.Option(200, "--limit", min=1),
          as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """The remembered entities (with how many facts each), or the latest facts with --facts."""
    store = _store(ctx)
    if facts:
        rows = store.facts(limit=limit)
        if as_json:
            say(visible_json([f.as_dict() for f in rows], indent=1))
            return
        for f in rows:
            say(_fact_line(f))
        if not rows:
            say("nothing remembered yet")
        return
    entities = store.entities(kind=kind, limit=limit)
    if as_json:
        say(visible_json(entities, indent=1))
        return
    stats = store.stats()
    say(f"{stats['entities']} entities, {stats['facts']} facts, {stats['relations']} relations")
    for e in entities:
        say(f"{e['id']:<6} {e['kind']:<13} {e['name']}  ({e['facts']} facts)")
    if kind is None:
        # what was remembered is what a person looks for: the latest facts too, not only the count of them
        latest = store.facts(limit=min(limit, LATEST_FACTS_SHOWN))
        if latest:
            say(f"\nLatest facts{' (all: jarvis memory list --facts)' if stats['facts'] > len(latest) else ''}:")
            for f in latest:
                say(_fact_line(f))


@memory_app.command("show")
def show(ctx: typer.Context, entity: str = typer.Argument(..., help="a name or an entity id"),
         as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """An entity: its facts, its relations, and where each came from."""
    from orchestrator.memory import MemoryError

    store = _store(ctx)
    try:
        found = store.about(entity)
    except MemoryError as exc:
        fail(str(exc))
    if found is None:
        fail(f"nothing is remembered about {entity!r} (`jarvis memory list` shows what is)")
    if as_json:
        say(visible_json(found, indent=1))
        return
    say(f"{found['name']} ({found['kind']}, id {found['id']})" + (f"  -> {found['link']}" if found["link"] else ""))
    for f in found["facts"]:
        say(_fact_line(store.get(f["id"])))
    for r in found["relations"]:
        say(f"  {r['subject']} {r['predicate']} {r['object']}" + ("" if r["trusted"] else "  [from outside content]"))


@memory_app.command("search")
def search(ctx: typer.Context, query: str, k: int = typer.Option(10, "-k", min=1, max=100),
           as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """The facts that best match QUERY (keywords, and meaning when an embeddings endpoint is configured)."""
    hits = _store(ctx).search(query, k, include_expired=True)
    if as_json:
        say(visible_json([h.as_dict() for h in hits], indent=1))
        return
    for h in hits:
        say(_fact_line(h))
    if not hits:
        say("no remembered fact matches")


@memory_app.command("forget")
def forget(ctx: typer.Context, ref: str = typer.Argument(..., help="a fact (m12 or 12) or, with --entity, an entity"),
           entity: bool = typer.Option(False, "--entity", help="forget an entity and every fact about it")) -> None:
    """Delete a fact (from the store, its search index and its vector), or an entity with all its facts. The
    conversations they came from are not touched."""
    from orchestrator.memory import MemoryError

    store = _store(ctx)
    if entity:
        try:
            gone = store.forget_entity(ref)
        except MemoryError as exc:
            fail(str(exc))
        if gone is None:
            fail(f"no entity {ref!r}")
        say(f"forgot {gone[0]} and {gone[1]} fact(s)")
        return
    number = ref[1:] if ref.lower().startswith("m") else ref
    if not number.isdigit():
        fail(f"{ref!r} is not a fact id (m12 or 12); to forget an entity by name add --entity")
    view = store.forget(int(number))
    if view is None:
        fail(f"there is no fact m{number}")
    say(f"forgot m{number}: {view.text}")


@memory_app.command("export")
def export(ctx: typer.Context, path: Path = typer.Argument(None, help="the file to write (default: print)")) -> None:
    """The whole memory as JSON (entities, facts with their sources, relations), to move it between machines."""
    from orchestrator.memory.transfer import export_memory

    data = json.dumps(export_memory(_store(ctx)), ensure_ascii=False, indent=1)
    if path is None:
        say(data)
        return
    path.expanduser().write_text(data + "\n", encoding="utf-8")
    say(f"wrote {path}", err=True)


MAX_IMPORT_BYTES = 200_000_000


@memory_app.command("import")
def import_(ctx: typer.Context, path: str = typer.Argument(..., help="a file written by `jarvis memory export`, or - "
                                                                    "for standard input"),
            trust: bool = typer.Option(False, "--trust", help="keep what the file says about each fact's source and "
                                                              "trust: only for your own export")) -> None:
    """Add an exported memory to this one (what is already known is confirmed, not copied). Its facts are kept as
    imported and untrusted (data to the planner, not your words) unless --trust: a file can say anything."""
    from orchestrator.memory import MemoryError
    from orchestrator.memory.transfer import import_memory

    try:
        if path == "-":
            raw = sys.stdin.read(MAX_IMPORT_BYTES + 1)
        else:
            file = Path(path).expanduser()
            if not file.is_file():
                fail(f"{path} is not a file")
            if file.stat().st_size > MAX_IMPORT_BYTES:
                fail(f"{path} is larger than {MAX_IMPORT_BYTES // 1_000_000} MB: not a memory export")
            raw = file.read_text(encoding="utf-8")
        data = json_bounds.loads(raw)
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {exc}")
    except json.JSONDecodeError as exc:
        fail(f"{path} is not JSON ({exc.msg} at line {exc.lineno}): give a file written by `jarvis memory export`")
    except json_bounds.TooDeep as exc:  # an export nests four levels; 100,000 were a RecursionError traceback
        fail(f"{path} is not a memory export ({exc}): give a file written by `jarvis memory export`")
    try:
        added = import_memory(_store(ctx), data, trust=trust)
    except MemoryError as exc:
        fail(str(exc))
    say(f"imported: {added['entities']} new entities, {added['facts']} new facts, "
        f"{added['relations']} new relations" + ("" if trust else " (as imported, untrusted: --trust keeps what "
                                                 "the file says, for your own export)"))


@memory_app.command("proposals")
def proposals_(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Facts proposed from your conversations (memory.propose_from_turns), waiting for accept or reject."""
    from orchestrator.memory.extraction import proposals

    rows = proposals(_store(ctx))
    if as_json:
        say(visible_json(rows, indent=1))
        return
    for p in rows:
        about = f"{p['about']} ({p['kind'] or 'thing'}): " if p["about"] else ""
        say(f"{p['id']:<6} {about}{p['fact']}  [thread {p['thread_id']}]")
    if not rows:
        say("no proposals waiting")


def _answer(ctx: typer.Context, proposal_id: int, accept: bool) -> None:
    from orchestrator.memory import MemoryError
    from orchestrator.memory.extraction import answer_proposal

    try:
        out = answer_proposal(_store(ctx), proposal_id, accept)
    except MemoryError as exc:
        fail(str(exc))
    say(f"proposal {proposal_id} {out['status']}" + (f": remembered as m{out['fact_id']}" if accept else ""))


@memory_app.command("accept")
def accept(ctx: typer.Context, proposal_id: int) -> None:
    """Remember a proposed fact."""
    _answer(ctx, proposal_id, True)


@memory_app.command("reject")
def reject(ctx: typer.Context, proposal_id: int) -> None:
    """Drop a proposed fact."""
    _answer(ctx, proposal_id, False)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
