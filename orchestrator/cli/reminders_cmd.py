"""`jarvis reminders create|list|cancel|fire|import` and `jarvis scheduler [--for SECONDS]`."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import datetime, timedelta, timezone

import typer

from orchestrator.cli import dumps, fail, say, state

reminders_app = typer.Typer(help="Reminders that fire into agents, webhooks, jorbs or a chat thread.",
                            no_args_is_help=True)


def _store(ctx: typer.Context):
    from orchestrator.reminders import ReminderStore

    return ReminderStore(state(ctx).settings)


@reminders_app.command("create")
def create(
    ctx: typer.Context,
    title: str = typer.Option(..., "--title", help="a short title"),
    when: str = typer.Option(..., "--when", help="the time in words ('tomorrow at 9am', 'in 20 minutes') or ISO 8601; without a zone it is your local time"),
    rrule: str = typer.Option(None, "--rrule", help="RFC 5545 rule, e.g. FREQ=DAILY;BYHOUR=18"),
    process_name: str = typer.Option(None, "--process-name", help="an agent script to fire into (seed 001 STDIO)"),
    webhook_url: str = typer.Option(None, "--webhook-url", help="POST the reminder as JSON to this URL"),
    jorb: str = typer.Option(None, "--jorb", help="wake this jorb with the reminder"),
    thread: str = typer.Option(None, "--thread", help="post into this chat thread (default: the 'reminders' thread)"),
    description: str = typer.Option(None, "--description", help="longer text"),
    priority: str = typer.Option("medium", "--priority", help="low, medium or high"),
    project: str = typer.Option(None, "--project", help="a project id to group reminders"),
    missed: str = typer.Option(None, "--missed", help="if Jarvis was not running at its time: catch_up, skip or ask"),
    as_json: bool = typer.Option(False, "--json", help="print the reminder as JSON"),
) -> None:
    """Create a reminder. With no target option it goes to the chat."""
    from orchestrator.reminders import ReminderInputError, ReminderRequest

    store = _store(ctx)
    if not (process_name or webhook_url or jorb or thread):
        thread = state(ctx).settings.scheduler.chat_thread
    req = ReminderRequest(title=title, when=when, rrule=rrule, process_name=process_name, webhook_url=webhook_url,
                          jorb_id=jorb, thread_id=thread, description=description, priority=priority,
                          project_id=project, missed_policy=missed)
    try:
        r = store.create(req, created_by="cli")
    except ReminderInputError as exc:
        fail(str(exc), code=2)
    if as_json:
        say(dumps(r.as_dict()))
        return
    repeat = f", repeats {r.rrule}" if r.rrule else ""
    say(f"{r.id}  {r.title!r} due {store_describe(store, r.due_date)}{repeat} -> {r.target_kind} {r.target}")
    due = r.due_date if r.due_date.tzinfo else r.due_date.replace(tzinfo=timezone.utc)
    if not r.rrule and due < datetime.now(timezone.utc) - timedelta(seconds=60):
        say(f"Note: that time has already passed; the reminder fires as soon as the scheduler runs "
            f"(`jarvis reminders cancel {r.id}` if you meant another day).", err=True, fg=typer.colors.YELLOW)


def store_describe(store, value) -> str:
    from orchestrator.reminders.recurrence import describe

    return describe(value, store.zone)


@reminders_app.command("list")
def list_(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON (every field)"),
          status: str = typer.Option(None, "--status", help="only this status (pending, sent, failed, ...)"),
          limit: int = typer.Option(None, "--limit", help="at most this many")) -> None:
    """List reminders by due time, with their status, target, attempts and last error."""
    from orchestrator.reminders import ReminderInputError

    store = _store(ctx)
    try:
        rows = store.list(status=status, limit=limit)
    except ReminderInputError as exc:
        fail(str(exc), code=2)
    if as_json:
        say(dumps([r.as_dict() for r in rows]))
        return
    if not rows:
        say("no reminders yet: `jarvis reminders create --title T --when 2030-01-01T09:00`")
    for r in rows:
        repeat = f" [{r.rrule}]" if r.rrule else ""
        line = (f"{r.id}  {r.status:<9} {store_describe(store, r.due_date):<22} {r.title[:50]}{repeat}"
                f"  -> {r.target_kind} {r.target}")
        if r.last_error and r.status != "sent":
            line += f"  ({r.last_error[:120]})"
        say(line)


@reminders_app.command("cancel")
def cancel(ctx: typer.Context, reminder_id: str) -> None:
    """Cancel a pending or missed reminder (a recurring one stops repeating)."""
    from orchestrator.reminders import ReminderNotFound, ReminderStateError

    try:
        r = _store(ctx).cancel(reminder_id)
    except (ReminderNotFound, ReminderStateError) as exc:
        fail(str(exc))
    say(f"{r.id} cancelled")


@reminders_app.command("fire")
def fire(ctx: typer.Context, reminder_id: str) -> None:
    """Fire a missed, failed or pending reminder at the next scheduler tick."""
    from orchestrator.reminders import ReminderNotFound, ReminderStateError

    try:
        r = _store(ctx).fire_now(reminder_id)
    except (ReminderNotFound, ReminderStateError) as exc:
        fail(str(exc))
    say(f"{r.id} will fire at the next scheduler tick")


def scheduler_cmd(ctx: typer.Context, for_s: float = typer.Option(
        None, "--for", min=0, help="stop cleanly after this many seconds (for scripts)")) -> None:
    """Run the reminder scheduler alone (`jarvis run` runs it too). Ctrl-C stops it."""

    from orchestrator.app import App
    from orchestrator.llm.no_model import NoModel

    settings = state(ctx).settings
    if not state(ctx).verbose:
        logging.getLogger("orchestrator.reminders").setLevel(logging.INFO)  # show fires, ACKs, agent stderr
    stop = threading.Event()

    def _stop(signum, _frame) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    try:
        scheduler = App(settings, llm=NoModel()).scheduler()  # posting a reminder never calls the model
    except Exception as exc:  # noqa: BLE001 - one clear line
        fail(f"could not start the scheduler: {exc}")
    pending = scheduler.store.next_fire_at()
    say(f"scheduler running (tick {settings.scheduler.tick_s:g} s; next reminder "
        f"{store_describe(scheduler.store, pending) if pending else 'none pending'})", err=True)
    scheduler.run(duration_s=for_s, stop_event=stop)
    say("scheduler stopped", err=True)


@reminders_app.command("import")
def import_(ctx: typer.Context, path: str = typer.Argument(..., help="reminders.json written by `jarvis export`")) -> None:
    """Add the reminders of an exported file, as untrusted: each fires only into a chat thread, which it marks as
    having read outside content (a file can say anything)."""
    from pathlib import Path

    from orchestrator.core import json_bounds
    from orchestrator.reminders.transfer import import_reminders

    file = Path(path).expanduser()
    try:
        if file.stat().st_size > 50_000_000:
            fail(f"{path} is larger than 50 MB: not a reminders export")
        data = json_bounds.loads(file.read_text(encoding="utf-8"))
        made, left = import_reminders(_store(ctx), data, source=file.name)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: bad JSON, too deep, not reminders
        fail(f"cannot import {path}: {exc}")
    say(f"imported {len(made)} reminder(s) from {path}, as written outside your conversations")
    for why in left:
        say(f"  not imported: {why}")


def register(app: typer.Typer) -> None:
    app.add_typer(reminders_app, name="reminders")
    app.command("scheduler")(scheduler_cmd)
