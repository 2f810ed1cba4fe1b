"""Backups in the Settings view: the last backup and its outcome (a HEALTH_CHECKS section, the same check as
`jarvis doctor`), and POST /api/backup, the section's button, which makes one now (orchestrator/backup/)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from orchestrator.backup.schedule import folder, run_backup
from orchestrator.core.secrets import redacted
from orchestrator.server.health import backup_check

from . import AppContext, app_context
from .settings import HEALTH_CHECKS

ROUTER = APIRouter()
TITLE = "Backups"


def backups_health(ctx: AppContext) -> dict[str, Any]:
    s = ctx.settings
    check = backup_check(s)
    every = f"made {s.backup.every}, the last {s.backup.keep} kept" if s.backup.every else "none scheduled"
    return {"title": TITLE, "items": [{"name": "last backup", "ok": check.ok, "message": check.detail,
                                       "fix": check.fix, "state": None if check.ok is not None else "none"}],
            "note": f"Backups go to {folder(s)} ({every}; backup.every in the config file).",
            "action": {"label": "Back up now", "post": "/api/backup"}}


@ROUTER.post("/backup")
def back_up_now(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """Make a backup now (in the request: the button waits for its outcome) and return its record."""
    return redacted(run_backup(ctx.settings, "ui"))


HEALTH_CHECKS.append(backups_health)
