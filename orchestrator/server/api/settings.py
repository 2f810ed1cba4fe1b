"""GET /api/settings (the active configuration, secrets masked, background services, tool providers),
GET /api/settings/health (model endpoints, checked with GET /models; slow when one is down; with the last tool-calling
probe's answer), POST /api/settings/models/{role}/tools (probe whether the model calls tools: llm/tool_probe.py),
and the model picker:
GET /api/settings/models (local servers found answering, whether the built-in model is installed) and
POST /api/settings/models/primary (check a server or the built-in model, write it to the config, switch to it).
Every answer goes through core.secrets.redacted: a base URL's password and secret query values are not shown."""

from __future__ import annotations

import logging
from pathlib import PurePath
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from orchestrator.core import secrets
from orchestrator.core.config import local_overlay_path
from orchestrator.llm.client import check_endpoint, model_config
from orchestrator.core.redaction import redact_config_text, redact_value
from orchestrator.core.secrets import redacted
from . import AppContext, View, app_context

log = logging.getLogger(__name__)
router = APIRouter()

# More health sections for the Settings view (MCP servers, channels...): callables (ctx) -> {"title": str,
# "items": [{"name", "ok", "message", "fix", "state"?}], "note"?: str}; ok is true, false (shown with its fix) or
# null (neither: switched off, not started). A module of this package appends to it when it is imported, as
# orchestrator/server/api/mcp_health.py does: `HEALTH_CHECKS.append(mcp_servers_health)`.
HEALTH_CHECKS: list[Callable[[AppContext], dict[str, Any]]] = []


def short_model_name(model: str) -> str:
    """What the header shows: a model named by its file (llama.cpp's server lists the path it was given) by the
    file's name without `.gguf`; any other name as it is."""
    if model.lower().endswith(".gguf") or model.startswith(("/", "~")) or "\\" in model:
        name = PurePath(model.replace("\\", "/")).name
        return name[:-5] if name.lower().endswith(".gguf") else name
    return model

@router.get("/settings")
def settings_view(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    s = ctx.settings
    path = s.source_path
    text = None
    if path is not None and path.is_file():
        text = redact_config_text(path.read_text(encoding="utf-8"))
    local = local_overlay_path(path) if path is not None else None
    local_text = redact_config_text(local.read_text(encoding="utf-8")) if local and local.is_file() else None
    return redacted({
        "config_file": str(path) if path else None,
        "local_file": str(local) if local_text is not None else None,  # the user's choices, merged over it
        "local_text": local_text,
        "profile": s.profile,
        "config_text": text,
        "effective": redact_value(s.model_dump(mode="json", exclude={"profiles"})),
        "data_dir": str(s.data_dir),
        "server": {"host": s.server.host, "port": ctx.extras.get("port", s.server.port),
                   "max_upload_mb": s.server.max_upload_mb},
        "services": ctx.services.report() if ctx.services else [],
        "keyring": secrets.backend_info(),
        "provider_errors": dict(ctx.runtime.catalog.errors),
    })


@router.get("/settings/health")
def health(sections: bool = True, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """`sections=false`: the model endpoints only (the UI's start-up banner, which must not wait for MCP servers)."""
    roles = ["primary"] + (["heavy"] if ctx.settings.models.heavy is not None else [])
    models = []
    for role in roles:
        _, cfg = model_config(ctx.settings, role)  # type: ignore[arg-type]
        ok, message = check_endpoint(ctx.settings, role)  # type: ignore[arg-type]
        builtin = cfg.provider == "embedded"  # Jarvis runs it itself: there is no URL to show or to change
        models.append({"role": role, "base_url": None if builtin else cfg.base_url, "model": cfg.model,
                       "label": short_model_name(cfg.model),
                       "provider": cfg.provider, "builtin": builtin, "ok": ok, "message": message,
                       "notice": cfg.notice, "tools": _last_tools(ctx, role),
                       "fix": None if ok else ("Start the model server, or choose another model below: the switch "
                                               "takes effect at once." if role == "primary" else
                                               f"Start the model server, or change models.{role} in the config "
                                               "file and restart `jarvis run`.")})
    found: list[dict[str, Any]] = []
    for check in HEALTH_CHECKS if sections else []:
        try:
            found.append(check(ctx))
        except Exception as exc:  # noqa: BLE001 - one failing check is itself reported
            log.exception("health check %s failed", getattr(check, "__name__", check))
            found.append({"title": getattr(check, "__name__", "health check"), "items": [
                {"name": "check", "ok": False, "message": f"{type(exc).__name__}: {exc}", "fix": None}]})
    return redacted({"models": models, "sections": found})  # base URLs and the messages quoting them


def _last_tools(ctx: AppContext, role: str) -> dict[str, Any] | None:
    from orchestrator.llm.tool_probe import last_probe

    found = last_probe(ctx.settings, role)  # type: ignore[arg-type]
    return found.as_dict() if found else None


@router.post("/settings/models/{role}/tools")
def check_tools(role: str, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """One probe with one tool: does the model send real tool calls, write them as text, or ignore tools?"""
    from orchestrator.llm.tool_probe import probe_tool_calls

    if role not in ("primary", "heavy"):
        raise HTTPException(404, "no such model role")
    return redacted(probe_tool_calls(ctx.settings, role).as_dict())  # type: ignore[arg-type]


@router.get("/settings/models")
def found_models(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """What the user can pick: the usual local servers that answer now, and the built-in model if installed."""
    from orchestrator.llm.discovery import builtin_model, find_local_servers

    primary = ctx.settings.models.primary
    builtin = builtin_model()
    return redacted({"servers": [{"name": f.name, "base_url": f.base_url, "models": f.models} for f in find_local_servers()],
                   "builtin": builtin is not None, "builtin_model": builtin.model if builtin else None,
                   "current": {"model": primary.model, "builtin": primary.provider == "embedded",
                               "base_url": None if primary.provider == "embedded" else primary.base_url}})


class ModelChoiceIn(BaseModel):
    builtin: bool = False
    base_url: str | None = Field(None, max_length=2000)
    model: str | None = Field(None, max_length=300)


@router.post("/settings/models/primary")
def choose_primary(body: ModelChoiceIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    from orchestrator.llm.choice import ModelChoiceError, use_builtin, use_server

    try:
        if body.builtin:
            return redacted(use_builtin(ctx.settings, ctx.runtime))
        if not body.base_url:
            raise ModelChoiceError("give the server's base URL (e.g. http://localhost:11434/v1), or pick the built-in model")
        return redacted(use_server(ctx.settings, ctx.runtime, body.base_url, body.model))
    except ModelChoiceError as exc:
        raise HTTPException(400, redacted(str(exc))) from None


VIEW = View(name="settings", title="Settings", router=router, order=90)
