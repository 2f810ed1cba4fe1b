"""`jarvis threads list|show|trust` and `jarvis runs list|show`: conversations and their telemetry."""

from __future__ import annotations

import json

import typer

from orchestrator.cli import dumps, fail, say, state

threads_app = typer.Typer(help="Conversations kept in the checkpointer.", no_args_is_help=True)
runs_app = typer.Typer(help="Telemetry of each run: node timings, tool calls, tokens.", no_args_is_help=True)


@threads_app.command("list")
def threads_list(ctx: typer.Context, limit: int = typer.Option(50, help="at most this many"),
                 as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List threads, most recent first."""
    from orchestrator.storage.threads import ThreadIndex

    rows = ThreadIndex(state(ctx).settings).list(limit=limit)
    if as_json:
        say(dumps([r.as_dict() for r in rows]))
        return
    if not rows:
        say("no threads yet: start one with `jarvis chat`")
    for r in rows:
        say(f"{r.thread_id:<24} {r.status:<8} {r.updated_at:%Y-%m-%d %H:%M}  {r.title[:60]}")


@threads_app.command("show")
def threads_show(ctx: typer.Context, thread_id: str, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Show a thread's messages and tool calls (its checkpoint, and the archive of messages folded into its summary)."""
    from orchestrator.storage.threads import ThreadIndex, message_view
    from orchestrator.chat.turns import thread_config

    st = state(ctx)
    graph = st.graph()
    snapshot = graph.get_state(thread_config(thread_id))
    values = snapshot.values if isinstance(snapshot.values, dict) else {}
    messages = ThreadIndex(st.settings).archived(thread_id) + list(values.get("messages", []))
    if not messages:
        fail(f"no thread {thread_id!r} (see `jarvis threads list`)")
    views = [message_view(m) for m in messages]
    pending = [{"interrupt_id": i.id, **(i.value if isinstance(i.value, dict) else {"value": i.value})}
               for i in snapshot.interrupts]
    if as_json:
        say(dumps({"thread_id": thread_id, "messages": views, "pending": pending, "summary": values.get("summary")}))
        return
    for v in views:
        if v["type"] == "human":
            say(f"you: {v['content']}", bold=True)
        elif v["type"] == "ai":
            for c in v.get("tool_calls", []):
                say(f"  call {c['name']}({json.dumps(c['args'], ensure_ascii=False)[:200]})", fg=typer.colors.CYAN)
            for c in v.get("invalid_tool_calls", []):
                say(f"  bad call {c.get('name')}: {c.get('error')}", fg=typer.colors.RED)
            if v["content"]:
                say(f"jarvis: {v['content']}")
        elif v["type"] == "tool":
            color = typer.colors.RED if v.get("status") == "error" else typer.colors.BLUE
            say(f"  result {v.get('name')}: {v['content'][:300]}", fg=color)
    for p in pending:
        say(f"  pending confirmation: {p.get('summary')} (jarvis approve {thread_id})", fg=typer.colors.YELLOW)


@threads_app.command("prune")
def threads_prune(ctx: typer.Context,
                  keep: int = typer.Option(1, "--keep", min=1, help="checkpoints kept per thread (the newest)"),
                  thread: str = typer.Option(None, "--thread", help="only this thread (finished or not)"),
                  vacuum_file: bool = typer.Option(False, "--vacuum", help="also shrink the database file")) -> None:
    """Remove old checkpoints of finished threads (nothing pending) and report the bytes freed."""
    from orchestrator.storage.checkpoints import prune_thread, vacuum
    from orchestrator.storage.threads import ThreadIndex

    st = state(ctx)
    targets = [thread] if thread else [t.thread_id for t in ThreadIndex(st.settings).list(limit=1_000_000)]
    st.graph()  # a clear error when Jarvis cannot start
    total = removed = 0
    for tid in targets:
        snapshot = st.app().graph_for_thread(tid).get_state({"configurable": {"thread_id": tid}})
        if snapshot.next and not thread:
            continue  # still running or waiting: left alone
        report = prune_thread(st.settings, tid, keep)
        total += report.bytes_freed
        removed += report.checkpoints_removed
    shrunk = vacuum(st.settings) if vacuum_file else 0
    say(f"removed {removed} checkpoints from {len(targets)} threads, freeing {total} bytes"
        + (f"; the file shrank by {shrunk} bytes" if vacuum_file else ""))


@runs_app.command("list")
def runs_list(ctx: typer.Context, limit: int = typer.Option(20), thread: str = typer.Option(None, "--thread"),
              as_json: bool = typer.Option(False, "--json")) -> None:
    """List recent runs with their duration, tokens and tool calls."""
    from orchestrator.storage.telemetry import list_runs

    rows = list_runs(state(ctx).settings, limit=limit, thread_id=thread)
    if as_json:
        say(dumps([{c: getattr(r, c) for c in ("id", "thread_id", "graph", "started_at", "duration_ms", "status",
                                                      "error", "prompt_tokens", "completion_tokens", "model_calls",
                                                      "unreported_calls", "model_ms", "tool_calls", "tool_errors")}
                                for r in rows]))
        return
    if not rows:
        say("no runs recorded yet")
    for r in rows:
        say(f"{r.id[:8]}  {r.started_at:%Y-%m-%d %H:%M:%S}  {r.outcome_text():<11} {r.duration_ms:8.0f} ms  "
            f"{r.tokens_text()}  tools {r.tool_calls} ({r.tool_errors} errors)  "
            f"thread {r.thread_id}")


@runs_app.command("show")
def runs_show(ctx: typer.Context, run_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Show a run's timeline: nodes, model calls and tool calls with their durations."""
    from orchestrator.storage.telemetry import get_run

    found = get_run(state(ctx).settings, run_id)
    if found is None:
        fail(f"no run {run_id!r} (see `jarvis runs list`)")
    run, events = found
    if as_json:
        say(dumps({"id": run.id, "thread_id": run.thread_id, "status": run.status, "duration_ms": run.duration_ms,
                          "prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens,
                          "unreported_calls": run.unreported_calls,
                          "error": run.error, "events": [{"kind": e.kind, "name": e.name, "offset_ms": e.offset_ms,
                                                          "duration_ms": e.duration_ms, "ok": bool(e.ok),
                                                          "detail": e.detail} for e in events]}))
        return
    say(f"run {run.id} thread {run.thread_id} {run.status} {run.duration_ms:.0f} ms, "
        f"{run.tokens_text()}")
    if run.error:
        say(f"  error: {run.error}", fg=typer.colors.RED)
    for e in events:
        mark = "" if e.ok else "  FAILED"
        say(f"  +{e.offset_ms:7.1f} ms {e.kind:<5} {e.name:<24} {e.duration_ms:8.1f} ms{mark}")

@threads_app.command("trust")
def threads_trust(ctx: typer.Context, thread_id: str) -> None:
    """Clear a thread's taint: what it read from outside (files, mail, pages) stops making later effects ask first.

    Once a thread has read content from outside the conversation, side effects that are automatic ask first for
    the rest of the thread, since that content (or its summary) stays in what the model sees. Run this when you
    have checked what was read; content read after it taints the thread again."""
    from orchestrator.chat.state import tainted
    from orchestrator.chat.turns import thread_config

    graph = state(ctx).graph()
    config = thread_config(thread_id)
    snapshot = graph.get_state(config)
    values = snapshot.values if isinstance(snapshot.values, dict) else {}
    if not values:
        fail(f"no thread {thread_id!r} (see `jarvis threads list`)")
    if snapshot.interrupts:
        fail(f"{thread_id} waits for a confirmation: answer it first (jarvis approve {thread_id} / jarvis deny {thread_id})")
    untrusted = int(values.get("untrusted_turn", -1))
    if not tainted(untrusted, int(values.get("trusted_after_turn", -1))):
        say(f"{thread_id} has read nothing from outside since it was last trusted: nothing to clear")
        return
    graph.update_state(config, {"trusted_after_turn": untrusted}, as_node="respond")
    say(f"{thread_id}: what it read so far no longer makes automatic effects ask first")


@threads_app.command("import")
def threads_import(ctx: typer.Context, path: str = typer.Argument(..., help="threads.json written by `jarvis export`")) -> None:
    """Add the threads of an exported file, as untrusted: each is a new thread that counts as having read outside
    content (a later effect asks first until `jarvis threads trust`), its messages quoted, not taken as yours."""
    from pathlib import Path

    from orchestrator.backup.thread_import import MAX_BYTES, ImportRefused, import_threads
    from orchestrator.core import json_bounds
    from orchestrator.storage.threads import ThreadIndex

    st = state(ctx)
    file = Path(path).expanduser()
    try:
        if not file.is_file():
            fail(f"{path} is not a file")
        if file.stat().st_size > MAX_BYTES:
            fail(f"{path} is larger than {MAX_BYTES // 1_000_000} MB: not a threads export")
        data = json_bounds.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {path}: {exc}")
    except json.JSONDecodeError as exc:
        fail(f"{path} is not JSON ({exc.msg} at line {exc.lineno}): give threads.json written by `jarvis export`")
    except json_bounds.TooDeep as exc:
        fail(f"{path} is not a threads export ({exc})")
    try:
        done = import_threads(st.graph(), ThreadIndex(st.settings), data, source=file.name)
    except ImportRefused as exc:
        fail(f"nothing was imported from {path}: {exc}")
    say(f"imported {len(done)} thread(s) from {path}, as read from outside (effects ask first until `jarvis "
        "threads trust`)")
    for was, now in done:
        say(f"  {was} -> {now}" if was != now else f"  {now}")


def register(app: typer.Typer) -> None:
    app.add_typer(threads_app, name="threads")
    app.add_typer(runs_app, name="runs")
