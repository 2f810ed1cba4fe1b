"""GET /api/health (with the token): the running server's model, storage, scheduler, MCP servers, channels and disk
space, each with its state, last error and what to do (health.Check). `ok` is true when nothing is a problem.
`GET /healthz` (server/app.py, no token) says only up or down."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Depends

from orchestrator.core.config import Settings
from orchestrator.server.health import Check, backup_check, data_folder_check, disk_check, guarded, mcp_checks, model_check, storage_check
from orchestrator.core.secrets import redacted
from orchestrator.storage.engines import utcnow
from orchestrator.server.api import AppContext, app_context

ROUTER = APIRouter()


def _service(ctx: AppContext, name: str) -> tuple[dict[str, Any] | None, Any]:
    """The service's line of the services report, and its running object (the Scheduler, a poller)."""
    line = next((s for s in ctx.services.report() if s["name"] == name), None)
    running = next((getattr(s, "running", None) for s in ctx.services.services if s.name == name), None)
    return line, running


def scheduler_check(ctx: AppContext) -> Check:
    settings: Settings = ctx.settings
    if not settings.scheduler.enabled:
        return Check("scheduler", None, "switched off (scheduler.enabled: false)")
    line, scheduler = _service(ctx, "reminder-scheduler")
    if line is None or scheduler is None:
        return Check("scheduler", False if line else None,
                     f"not running: {line['detail'] if line else 'background services are off (--no-services)'}",
                     "See the log of jarvis run for why it did not start." if line else None)
    error = f"{scheduler.last_error[0]:%Y-%m-%d %H:%M:%S} UTC: {scheduler.last_error[1]}" if scheduler.last_error else None
    last = scheduler.last_tick_at
    if last is None:
        return Check("scheduler", None, "started; no tick yet", last_error=error)
    age = utcnow() - last
    detail = f"last tick {age.total_seconds():.0f} s ago ({last:%H:%M:%S} UTC)"
    if age > timedelta(seconds=max(60.0, 10 * settings.scheduler.tick_s)):
        return Check("scheduler", False, detail + ": it has stopped ticking",
                     "Reminders are late: see the log of jarvis run (`jarvis service logs`) and restart Jarvis.", error)
    return Check("scheduler", True, detail, last_error=error)


def channel_checks(ctx: AppContext) -> list[Check]:
    settings: Settings = ctx.settings
    out = [Check("channel local", True if settings.channels.local else None,
                 "on" if settings.channels.local else "switched off")]
    for name, cfg in (("telegram", settings.channels.telegram), ("matrix", settings.channels.matrix),
                      ("email", settings.channels.email)):
        if not cfg.enabled:
            out.append(Check(f"channel {name}", None, "switched off"))
            continue
        line, poller = _service(ctx, f"{name}-inbound")
        state, detail = (line["state"], line["detail"]) if line else ("not started", None)
        ok = state == "running" and not detail
        down = getattr(poller, "last_error", None) is not None and callable(getattr(poller, "down_note", None))
        fix = (f"Jarvis retries by itself, waiting longer each time (at most a minute); if it stays down, check the "
               f"network and channels.{name} (its address, its credentials: `jarvis secrets`)." if down
               else None if ok else f"Check channels.{name} in the configuration and its credentials (`jarvis secrets`).")
        out.append(Check(f"channel {name}", ok, state + (f": {detail}" if detail else ""), fix,
                         getattr(poller, "last_error", None) if down else detail))
    return out


def health_report(ctx: AppContext) -> list[Check]:
    s = ctx.settings
    checks = [guarded("model", lambda: model_check(s)),
              guarded("storage", lambda: storage_check(s, open_store=True)),
              guarded("data folder", lambda: data_folder_check(s)),
              guarded("disk space", lambda: disk_check(s)),
              guarded("scheduler", lambda: scheduler_check(ctx)),
              guarded("backups", lambda: backup_check(s))]
    for more in (lambda: mcp_checks(s, ctx.app.mcp_manager, start=False), lambda: channel_checks(ctx)):
        try:
            checks.extend(more())
        except Exception as exc:  # noqa: BLE001 - one section failing leaves the others
            checks.append(Check("health", False, f"a section could not be checked: {type(exc).__name__}: {exc}",
                                "See the log of jarvis run."))
    return checks


@ROUTER.get("/health")
def health(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    checks = health_report(ctx)
    # masked: the model's check quotes its base URL, which can hold a password or a key
    return redacted({"ok": all(c.ok is not False for c in checks), "checks": [c.as_dict() for c in checks]})
