"""Building a process's parts in tests the way the App does (orchestrator/app.py)."""

from __future__ import annotations

from typing import Any

from orchestrator.app import App
from orchestrator.jorbs.service import JorbService


def jorb_service(settings: Any, *, catalog: Any = None, **kwargs: Any) -> JorbService:
    """A JorbService over a new App's catalog (or `catalog`), with test options (llm, spawn, checkpointer, ...)."""
    return JorbService(settings, catalog=catalog if catalog is not None else App(settings).catalog, **kwargs)
