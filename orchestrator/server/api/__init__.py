"""The JSON API of the web UI: one module per view, discovered automatically (like the CLI commands).

A module here exports `VIEW = View(...)` (a tab of the UI with its router) and/or `ROUTER` (endpoints with no
tab). Routers are mounted under /api. A view's front end is `orchestrator/server/web/views/<name>.js`; the UI asks
`GET /api/views` which tabs exist and imports their modules, so a view is there exactly when its module is.
`available(ctx)` can hide a view whose backend is switched off in the configuration.

Adding the Reminders view when the scheduler lands:

    # orchestrator/server/api/reminders.py
    from fastapi import APIRouter, Depends
    from . import AppContext, View, app_context

    router = APIRouter(prefix="/reminders")

    @router.get("")
    def list_reminders(ctx: AppContext = Depends(app_context)) -> list[dict]:
        return [r.as_dict() for r in ReminderStore(ctx.settings).list()]

    VIEW = View(name="reminders", title="Reminders", router=router, order=40)

plus `orchestrator/server/web/views/reminders.js` exporting `mount(el, ui)` (see web/views/runs.js for a small one).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request

from orchestrator.core.config import Settings

log = logging.getLogger(__name__)


@dataclass
class AppContext:
    """What every endpoint needs; `request.app.state.jarvis`."""

    app: Any  # orchestrator.app.App: the process's parts (graph, runtime, jorbs, catalog, ...)
    turns: Any  # live_turns.TurnHub
    services: Any  # services.ServiceManager
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def settings(self) -> Settings:
        return self.app.settings

    @property
    def graph(self) -> Any:
        return self.app.graph

    @property
    def runtime(self) -> Any:
        return self.app.runtime  # chat.runtime.JarvisRuntime: catalog, executor, threads


@dataclass
class View:
    name: str  # the front-end module web/views/<name>.js and the tab's id
    title: str
    router: APIRouter | None = None
    order: int = 50  # tab position, smaller first
    available: Callable[[AppContext], bool] = lambda ctx: True

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "module": f"/static/views/{self.name}.js"}


def app_context(request: Request) -> AppContext:
    return request.app.state.jarvis


def discover() -> tuple[list[View], list[APIRouter]]:
    """Every module of this package: its VIEW (or VIEWS) and ROUTER."""
    views: list[View] = []
    routers: list[APIRouter] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found = getattr(module, "VIEWS", None) or ([module.VIEW] if hasattr(module, "VIEW") else [])
        views.extend(found)
        if hasattr(module, "ROUTER"):
            routers.append(module.ROUTER)
    return sorted(views, key=lambda v: (v.order, v.name)), routers
