"""Health of the parts Jarvis needs, each as a `Check`: ok, a problem, or not applying here, with what was found,
its last error and one sentence of what to do. `GET /api/health` (api/health.py) reports those of the running
server; `jarvis doctor` (server/doctor.py) adds the machine's own (sandbox, keyring, port...). `GET /healthz`
answers only up or down (`alive`), without the token, for whatever watches the service.

Checks never raise: whatever goes wrong while checking is the problem they report.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from datetime import datetime, timezone
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from jarb_core.sql_schema import behind

from orchestrator.backup.schedule import PERIODS, runs
from orchestrator.core.config import Settings
from orchestrator.core.disk_full import is_disk_full
from orchestrator.core.secrets import redact
from orchestrator.storage.engines import Base, JARVIS_DB, database_url, is_postgres, jarvis_engine, sqlite_path

LOW_DISK_MB = 200  # below this, Jarvis warns: a long PDF, the checkpoints of a day, the model's logs


@dataclass
class Check:
    name: str
    ok: bool | None  # None: does not apply here (switched off, not configured)
    detail: str
    fix: str | None = None
    last_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def guarded(name: str, fn: Callable[[], Check]) -> Check:
    """Run a check; an exception while checking is its problem, not a crash of the report."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - reported
        return Check(name, False, f"the check itself failed: {type(exc).__name__}: {redact(str(exc))[:300]}",
                     "Run `jarvis doctor --verbose` to see the traceback, and report it if it is not your set-up.")


# -- last errors, recorded where they happen --------------------------------------------------------------

_last_errors: dict[str, tuple[float, str]] = {}
_errors_lock = threading.Lock()


def record_error(component: str, message: str) -> None:
    """The latest error of a component in this process (the server records storage errors of requests)."""
    with _errors_lock:
        _last_errors[component] = (time.time(), redact(message)[:500])


def last_error(component: str) -> str | None:
    with _errors_lock:
        found = _last_errors.get(component)
    if found is None:
        return None
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(found[0]))}: {found[1]}"


# -- the checks --------------------------------------------------------------------------------------------

def model_check(settings: Settings, role: str = "primary") -> Check:
    from orchestrator.llm.client import check_endpoint, model_config

    used, cfg = model_config(settings, role)  # type: ignore[arg-type]
    ok, message = check_endpoint(settings, role)  # type: ignore[arg-type]
    fix = None
    if not ok:
        fix = ("Start the model server or correct the model's name (Settings, or models.primary in the config); "
               "`jarvis model check` checks it again.") if cfg.provider != "embedded" else \
              "Install the built-in model server with `make install-local`, or set models.primary to a server you run."
    from orchestrator.llm.model_server import running

    started = running(role)
    if started is not None:
        message += f"; {started.describe()}"
    return Check(f"model ({used})", ok, message, fix, last_error("model"))


def tool_calls_check(settings: Settings, role: str = "primary") -> Check:
    """Whether the model calls tools (one probe, llm/tool_probe.py); not known when the model does not answer."""
    from orchestrator.llm.client import model_config
    from orchestrator.llm.tool_probe import probe_tool_calls

    used, _ = model_config(settings, role)  # type: ignore[arg-type]
    found = probe_tool_calls(settings, role)  # type: ignore[arg-type]
    return Check(f"model tools ({used})", found.ok, found.message, found.fix)


def data_folder_check(settings: Settings) -> Check:
    """The data folder can be written (a read-only mount, a folder of another user, a full disk)."""
    folder = Path(settings.storage.data_dir)
    # Not made here (doctor changes nothing): a folder still to be made must be makeable in its nearest parent.
    probe = folder if folder.exists() else next((p for p in folder.parents if p.exists()), Path("/"))
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".jarvis-write-check-") as f:
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        why = exc.strerror or str(exc)
        if is_disk_full(exc):
            return Check("data folder", False, f"{folder}: the disk is full ({why})",
                         "Free some space on that disk, or point storage.data_dir at a folder on another disk.")
        return Check("data folder", False, f"{folder} cannot be written: {why}",
                     "Make the folder writable by this user (mounted read-only? owned by another user?), or point "
                     "storage.data_dir at a writable folder.")
    return Check("data folder", True, f"{folder} is writable")


def storage_check(settings: Settings, *, open_store: bool = False) -> Check:
    """The jarvis database answers and its schema is current. `open_store`: use (and so migrate) the process's
    engine, as the running server does; otherwise look without changing anything (jarvis doctor)."""
    from .schema_tables import import_table_modules

    import_table_modules()
    where = "PostgreSQL (storage.url)" if is_postgres(settings) else str(sqlite_path(settings, JARVIS_DB))
    if not is_postgres(settings) and not sqlite_path(settings, JARVIS_DB).exists() and not open_store:
        return Check("storage", True, f"{where} does not exist yet; Jarvis creates it on its first start",
                     last_error=last_error("storage"))
    if open_store:
        engine = jarvis_engine(settings)
    else:
        from orchestrator.storage.pg import sqlalchemy_url

        url = database_url(settings, JARVIS_DB)
        engine = create_engine(sqlalchemy_url(url) if is_postgres(settings) else url)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            late = behind(conn, Base.metadata)
    except Exception as exc:  # noqa: BLE001
        return Check("storage", False, f"{where} cannot be read: {redact(str(exc))[:300]}",
                     "Check that the database is there and readable (storage.data_dir / storage.url).",
                     last_error("storage"))
    finally:
        if not open_store:
            engine.dispose()
    if late:
        return Check("storage", False, f"{where}: the schema is older than this Jarvis ({', '.join(late[:5])})",
                     "Start Jarvis once (`make run` or `jarvis run`): it migrates the database in place.",
                     last_error("storage"))
    return Check("storage", True, f"{where}: answers, schema current", last_error=last_error("storage"))


def disk_check(settings: Settings) -> Check:
    folder = Path(settings.storage.data_dir)
    probe = folder if folder.exists() else next((p for p in folder.parents if p.exists()), Path("/"))
    usage = shutil.disk_usage(probe)
    free_mb = usage.free // (1024 * 1024)
    detail = f"{free_mb} MB free of {usage.total // (1024 * 1024)} MB on the disk of {folder}"
    if free_mb < LOW_DISK_MB:
        return Check("disk space", False, detail,
                     f"Free some space (Jarvis needs at least {LOW_DISK_MB} MB; `jarvis threads prune --vacuum` frees "
                     "old checkpoints), or move storage.data_dir to another disk.")
    return Check("disk space", True, detail)


def mcp_checks(settings: Settings, manager: Any, *, start: bool) -> list[Check]:
    """One check per MCP server of `mcp.dir`, as `manager` (an McpManager) sees them. `start`: start those not
    running and wait up to mcp.startup_wait_s (jarvis doctor); otherwise only report what the manager knows."""
    folder = Path(settings.mcp.dir)
    if not folder.is_dir() or not any(folder.glob("*.toml")):
        return [Check("MCP servers", None, f"none configured ({folder})")]
    from orchestrator.mcp.pins import PinsUnreadable, pins_of

    if start:
        manager.ensure_started(wait_s=settings.mcp.startup_wait_s)
    out = []
    for s in manager.status():
        where = s.source or "its TOML file"
        name = f"MCP server {s.name}"
        try:
            changed = sorted(pins_of(settings.data_dir).changed(s.name, manager.tools_of(s.name))) \
                if s.state == "ready" else []
        except PinsUnreadable as exc:  # nothing to judge its tools by: none is offered
            out.append(Check(name, False, f"no tool offered: {exc}", "Mend the file, or remove it to take every "
                             "MCP tool as it is now"))
            continue
        if changed:  # mcp/pins.py: withheld from the model until the user has read what they say now
            out.append(Check(name, False, f"{s.tools} tool(s); changed what they say since first seen, not offered: "
                             f"{', '.join(changed)}", f"Read them and accept: jarvis mcp review {s.name}"))
        elif s.state == "ready":
            out.append(Check(name, True, f"{s.tools} tool(s)" + (f", restarted {s.restarts} time(s)" if s.restarts else ""),
                             last_error=s.last_error))
        elif s.state in ("unhealthy", "broken"):
            log = f" Its log: {s.log_file}." if s.log_file else ""
            out.append(Check(name, False, f"{s.state}: {s.last_error or 'it stopped answering'}",
                             f"Check that its command runs on its own and correct {where}.{log}", s.last_error))
        elif s.state in ("disabled", "unavailable"):
            out.append(Check(name, None, s.last_error or s.state))
        else:
            out.append(Check(name, None if not start else False, f"{s.state} (starts on first use)",
                             None if not start else f"It did not start within {settings.mcp.startup_wait_s:g} s; "
                                                    f"check its command in {where}."))
    return out


def backup_check(settings: Settings) -> Check:
    """The last backup's outcome (orchestrator/backup/schedule.py): none yet, skipped, failed, or one overdue."""
    done = runs(settings)
    every = settings.backup.every
    if every is not None and not settings.scheduler.enabled:
        return Check("backups", False, f"scheduled {every}, but the scheduler is off (scheduler.enabled: false): "
                     "no scheduled backup is made", "Turn the scheduler on, or run `jarvis backup create` yourself.")
    if not done:
        if every is None:
            return Check("backups", None, "no backup made yet and none scheduled",
                         "Run `jarvis backup create`, or set backup.every (e.g. daily) in the config file.")
        return Check("backups", None, f"scheduled {every}; none made yet (the first comes once `jarvis run` runs)")
    last = done[-1]
    when = f"{last['at']} ({last.get('trigger', 'manual')})"
    if last["outcome"] == "failed":
        return Check("backups", False, f"the last backup failed at {when}: {last['why']}",
                     "Fix what it says, then run `jarvis backup create` (or wait for the next scheduled one).")
    made = [r for r in done if r["outcome"] == "ran"]
    if last["outcome"] == "skipped":
        return Check("backups", False if every else None, f"the last backup was skipped at {when}: {last['why']}",
                     "Mount or create the backup folder (backup.to), or point backup.to at another folder.")
    if every and made and datetime.now(timezone.utc) - datetime.fromisoformat(made[-1]["at"]) > 2 * PERIODS[every]:
        return Check("backups", False, f"the last backup is from {made[-1]['at']}: older than two {every} periods",
                     "Check that `jarvis run` is running (its reminder scheduler makes the scheduled backups).")
    return Check("backups", True, f"last backup {when}: {last.get('path')} ({last.get('size', 0) // 1000} kB)")


def alive(settings: Settings) -> bool:
    """/healthz: this process serves and its database answers."""
    try:
        with jarvis_engine(settings).connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception as exc:  # noqa: BLE001
        record_error("storage", f"{type(exc).__name__}: {exc}")
        return False
