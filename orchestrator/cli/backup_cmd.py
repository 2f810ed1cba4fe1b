"""`jarvis backup create|verify|restore`: one file with everything Jarvis keeps, made while it runs, checked, and
restored onto an empty data folder, here or on another machine (orchestrator/backup/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from orchestrator.cli import fail, say, state

backup_app = typer.Typer(help="Back up everything Jarvis keeps into one file, check it, restore it.",
                         no_args_is_help=True)

PASSPHRASE_ENV = "JARVIS_BACKUP_PASSPHRASE"


def _passphrase(ask: bool, confirm: bool) -> str | None:
    """The passphrase from $JARVIS_BACKUP_PASSPHRASE, else asked on the terminal (None when neither)."""
    value = os.environ.get(PASSPHRASE_ENV)
    if value:
        return value
    if ask and sys.stdin.isatty():
        return typer.prompt("passphrase", hide_input=True, confirmation_prompt=confirm)
    return None


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _summary(manifest) -> str:
    dbs = [p for p in manifest.parts if p["kind"] in ("sqlite", "postgresql")]
    rows = sum(sum(p.get("tables", {}).values()) for p in dbs)
    others = len(manifest.parts) - len(dbs)
    return (f"{len(dbs)} database{'s' * (len(dbs) != 1)} ({rows} rows), {others} other file{'s' * (others != 1)}"
            f"{', secrets (encrypted)' if manifest.secrets else ''}")


@backup_app.command("create")
def create(ctx: typer.Context,
           to: Path = typer.Option(None, "--to", help="a folder (default: <data folder>-backups beside the data "
                                   "folder) or a file name ending in .jarvis-backup"),
           verify: bool = typer.Option(False, "--verify", help="then restore it into a temporary folder and check it"),
           include_secrets: bool = typer.Option(False, "--include-secrets", help="also carry Jarvis's keyring "
                                                "secrets, the whole file encrypted with a passphrase "
                                                f"(${PASSPHRASE_ENV} or asked)")) -> None:
    """Back up the databases (while Jarvis runs), the data folder, generated tools, MCP files and settings."""
    from orchestrator.backup.create import create_backup
    from orchestrator.backup.manifest import BackupRefused
    from orchestrator.backup.schedule import record
    from orchestrator.core.disk_full import is_disk_full

    settings = state(ctx).settings
    secrets, passphrase = None, None
    if include_secrets:
        from orchestrator.backup.secrets_part import read_secrets

        passphrase = _passphrase(ask=True, confirm=True)
        if not passphrase:
            fail(f"--include-secrets encrypts the backup with a passphrase: set ${PASSPHRASE_ENV} or run it in a "
                 "terminal to be asked")
        secrets = read_secrets(settings)
    try:
        made = create_backup(settings, to, secrets=secrets, passphrase=passphrase)
    except (BackupRefused, OSError) as exc:
        if is_disk_full(exc):
            where = Path(exc.filename).parent if getattr(exc, "filename", None) else (to or "the backup folder")
            why = (f"the disk is full: the backup could not be written ({where}). Nothing that looks like a backup "
                   "was left and the backups before it are as they were: free some space there, or give another "
                   "--to.")
        else:
            why = f"no backup was made: {exc}"
        record(settings, "failed", why, trigger="manual")
        fail(why)
    record(settings, "ran", None, trigger="manual", path=str(made.path), size=made.path.stat().st_size)
    say(f"backup written: {made.path} ({_size(made.path.stat().st_size)}; {_summary(made.manifest)})")
    if verify:
        _verify(made.path, passphrase)


def _verify(path: Path, passphrase: str | None) -> None:
    from orchestrator.backup.manifest import BackupRefused
    from orchestrator.backup.restore import verify_backup

    try:
        manifest = verify_backup(path, passphrase)
    except BackupRefused as exc:
        fail(f"the backup does not verify: {exc}")
    say(f"verified: restored into a temporary folder, every part matches its sha256, every database passes its "
        f"integrity check with the rows counted ({_summary(manifest)})")


@backup_app.command("verify")
def verify_(path: Path = typer.Argument(..., help="a backup file")) -> None:
    """Restore a backup into a temporary folder and check it (sha256s, row counts, integrity)."""
    _verify(path.expanduser(), _passphrase_for(path.expanduser()))


def _passphrase_for(path: Path) -> str | None:
    from orchestrator.backup.crypto import is_encrypted

    try:
        return _passphrase(ask=is_encrypted(path), confirm=False)
    except OSError:
        return None  # the restore says why the file cannot be read


@backup_app.command("restore")
def restore(ctx: typer.Context, path: Path = typer.Argument(..., help="a backup file"),
            force: bool = typer.Option(False, "--force", help="the data folder holds data: move it aside "
                                       "(<data>.before-restore-<time>) and write over tool and MCP files")) -> None:
    """Restore a backup onto an empty data folder (this machine's settings say where), then bring its schema
    forward to this Jarvis."""
    from orchestrator.backup.manifest import BackupRefused
    from orchestrator.backup.restore import restore_backup
    from orchestrator.core.secrets import set_secret
    from orchestrator.server.schema_tables import migrate_whole_schema

    settings = state(ctx).settings
    try:
        done = restore_backup(settings, path.expanduser(), force=force, passphrase=_passphrase_for(path.expanduser()),
                              migrate=migrate_whole_schema, put_secret=set_secret)
    except BackupRefused as exc:
        fail(f"nothing was restored: {exc}" if not str(exc).startswith("nothing") else str(exc))
    say(f"restored {path} (made {done.manifest.created_at} by Jarvis {done.manifest.jarvis_version}; "
        f"{_summary(done.manifest)}) into {settings.data_dir}")
    if done.moved_aside:
        say(f"the data that was there is kept in {done.moved_aside}")
    if done.settings_file:
        say(f"the old machine's settings are in {done.settings_file}: compare them with yours (paths, model)")
    if done.secrets:
        say(f"secrets put back in the keyring: {', '.join(done.secrets)}")




def export(ctx: typer.Context,
           to: Path = typer.Option(Path("jarvis-export"), "--to", help="the folder to write into")) -> None:
    """Your threads, memory, reminders and jorbs as JSON (memory.json imports with `jarvis memory import`) and
    Markdown, to read or to take to another tool."""
    from orchestrator.backup.export import write_export
    from orchestrator.chat.turns import thread_config
    from orchestrator.memory.transfer import export_memory
    from orchestrator.reminders import ReminderStore
    from orchestrator.storage.threads import ThreadIndex, message_view

    st = state(ctx)
    app = st.app()
    graph, index = st.graph(), ThreadIndex(st.settings)
    threads = []
    for row in index.list(limit=1_000_000):
        values = graph.get_state(thread_config(row.thread_id)).values
        values = values if isinstance(values, dict) else {}
        messages = index.archived(row.thread_id) + list(values.get("messages", []))
        threads.append({**row.as_dict(), "messages": [message_view(m) for m in messages]})
    jorbs = [app.jorbs.view(row.id).as_dict(full=True) for row in app.jorbs.list()]
    reminders = [r.as_dict() for r in ReminderStore(st.settings).list()]
    memory = export_memory(app.memory) if app.memory is not None else None
    written = write_export(to.expanduser(), threads=threads, memory=memory, reminders=reminders, jorbs=jorbs)
    say(f"exported {len(threads)} threads, {len(memory['facts']) if memory else 0} memory facts, {len(reminders)} "
        f"reminders and {len(jorbs)} jorbs into {to}: {', '.join(p.name for p in written)}")


def register(app: typer.Typer) -> None:
    app.add_typer(backup_app, name="backup")
    app.command("export")(export)
