"""GET /api/tools: every tool the planner can call now, from every provider, with its metadata.

A tool's contract (integrations/base.ToolMeta) is shown: source (static, mcp, generated), side effects with the
autonomy mode each gets, untrusted output (or why it is trusted), and under `metadata` the rest of the contract that
is not its default (an MCP tool's server, a demand to confirm...) with what the tool only displays (`shown`: a
generated tool's version, trust and test report). Providers that fail are listed with their error.

POST /api/tools/{name}/disable and /enable switch a tool off and on, like `jarvis tools disable|enable NAME`: a
generated tool through JARB's registry (every version), any other tool in the disabled_tools table
(orchestrator/tools/switches.py). A disabled tool is not given to the planner or to jorb scripts, and a call to it
is answered with "the user disabled it".
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path
from pydantic import BaseModel, Field

from integrations.base import KNOWN_SIDE_EFFECTS, ToolMeta, is_untrusted, side_effects_of, source_of, tool_meta
from jarb_core.factory import RegistryError

from orchestrator.core.visible import visible
from orchestrator.tools.autonomy import mode_for_effect
from orchestrator.jarb.tools import make_factory, open_registry
from orchestrator.tools.switches import ToolSwitches
from . import AppContext, View, app_context

router = APIRouter()

# Contract fields with a place of their own in the view (or nothing to show: functions).
_SHOWN_ELSEWHERE = {"source", "side_effects", "trusted_output", "shown"}


def _displayed(meta: ToolMeta) -> dict[str, Any]:
    """What the contract says beyond the view's own fields, its defaults left out, then what it only displays."""
    out = {f.name: _jsonable(getattr(meta, f.name)) for f in dataclasses.fields(meta)
           if f.name not in _SHOWN_ELSEWHERE and not callable(getattr(meta, f.name))
           and getattr(meta, f.name) != (f.default if f.default is not dataclasses.MISSING else None)}
    return {**out, **{k: _jsonable(v) for k, v in meta.shown.items()}}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def switches(ctx: AppContext) -> ToolSwitches:
    catalog_switches = getattr(ctx.runtime.catalog, "switches", None)
    if catalog_switches is None:
        catalog_switches = ctx.extras.setdefault("tool_switches", ToolSwitches(ctx.settings))
    return catalog_switches


def tool_view(tool: Any, ctx: AppContext, provider: str | None = None,
              disabled: frozenset[str] = frozenset()) -> dict[str, Any]:
    meta = tool_meta(tool)
    effects = side_effects_of(tool)
    try:
        schema = tool.get_input_schema().model_json_schema()
    except Exception:  # noqa: BLE001 - a tool with an odd schema still gets listed
        schema = tool.args if isinstance(getattr(tool, "args", None), dict) else {}
    return {
        "name": tool.name,
        "description": tool.description,
        "source": source_of(tool),
        "provider": provider,
        "side_effects": [{"name": e, "description": KNOWN_SIDE_EFFECTS.get(e, "declared by the tool"),
                          "mode": mode_for_effect(e, ctx.settings.autonomy)} for e in effects],
        "untrusted_output": is_untrusted(tool),
        "args_schema": _jsonable(schema),
        "metadata": _displayed(meta),
        "trusted_output": meta.trusted_output or None,
        "enabled": tool.name not in disabled,
        "unavailable": meta.unavailable() if meta.unavailable is not None else None,
        # Meta-tools (create_new_tool) belong to the graph itself, not to a provider the switch applies to.
        "can_disable": provider != "meta",
    }


def _all_tools(ctx: AppContext) -> tuple[list[tuple[Any, str]], dict[str, str]]:
    """(tool, provider) for every tool any provider offers, disabled ones included, first provider wins."""
    catalog = ctx.runtime.catalog
    found: list[tuple[Any, str]] = []
    seen: set[str] = set()
    for provider in catalog.providers:
        try:
            provided = provider.list_tools()
        except Exception as exc:  # noqa: BLE001 - recorded like the catalog does
            catalog.errors[provider.name] = str(exc)
            continue
        for tool in provided:
            if tool.name not in seen:
                seen.add(tool.name)
                found.append((tool, provider.name))
    for tool in ctx.runtime.meta_tools:
        if tool.name not in seen:
            seen.add(tool.name)
            found.append((tool, "meta"))
    return found, dict(catalog.errors)


@router.get("/tools")
def list_tools(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    disabled = switches(ctx).disabled()
    found, errors = _all_tools(ctx)
    tools = [tool_view(tool, ctx, provider, disabled) for tool, provider in found]
    offered = {t["name"] for t in tools}
    tools += [t for t in _disabled_generated(ctx) if t["name"] not in offered]
    offered |= {t["name"] for t in tools}
    # Switched off while its provider is gone (an MCP server that is down): still listed, so it can be enabled.
    absent = [{"name": r.name, "disabled_at": r.disabled_at.isoformat(), "note": r.note}
              for r in switches(ctx).rows() if r.name not in offered]
    pins_problem = getattr(_mcp_provider(ctx), "pins_problem", None)
    if pins_problem:  # mcp/pins.py: no MCP tool is offered until the pin file is mended or removed
        errors = {**errors, "mcp": pins_problem}
    return {"tools": tools, "provider_errors": errors, "disabled_absent": absent, "mcp_changed": _mcp_changed(ctx)}


def _mcp_provider(ctx: AppContext) -> Any:
    return next((p for p in ctx.runtime.catalog.providers if p.name == "mcp"), None)


def _mcp_changed(ctx: AppContext) -> list[dict[str, Any]]:
    """MCP tools withheld because they changed since first seen (mcp/pins.py), with both texts, shown as they are."""
    provider = _mcp_provider(ctx)
    return [{"server": c.server, "tool": c.tool, "added": c.added,
             "before": "(not in the server's first listing)" if c.added else visible(c.before["description"]),
             "now": visible(c.now["description"]), "schema_changed": c.before["input_schema"] != c.now["input_schema"],
             "also_changed": [{"input_schema": "arguments"}.get(p, p) for p in c.changed_parts()],
             "digest": c.digest}
            for _key, c in sorted(getattr(provider, "withheld", {}).items())]


class AcceptBody(BaseModel):
    tools: dict[str, str] = Field(min_length=1, max_length=1000, description="for each tool to accept, its MCP "
                                  "name -> the digest of the text shown (`mcp_changed`)")


@router.post("/mcp/{server}/accept")
def accept_mcp_changes(body: AcceptBody, server: str = Path(pattern=r"^[A-Za-z0-9_.-]{1,128}$"),
                       ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """Offer the named changed tools of `server` again as they are now, like `jarvis mcp review SERVER --accept`."""
    provider = _mcp_provider(ctx)
    changed = {c.tool for (srv, _name), c in getattr(provider, "withheld", {}).items() if srv == server}
    unknown = sorted(set(body.tools) - changed)
    if provider is None or unknown:
        raise HTTPException(404, f"no changed tool {', '.join(unknown or body.tools)} of the MCP server {server!r} "
                                 "waits for review (the list may be out of date: reload it)")
    accepted = provider.pins.accept(server, provider.manager.tools_of(server), body.tools)
    if set(accepted) != set(body.tools):
        raise HTTPException(409, f"{', '.join(sorted(set(body.tools) - set(accepted)))} changed again since it was "
                                 "shown; nothing was accepted for it. Reload and read what it says now.")
    return {"accepted": accepted}


def _registry(ctx: AppContext) -> Any:
    return open_registry(ctx.settings)


def _disabled_generated(ctx: AppContext) -> list[dict[str, Any]]:
    """Generated tools with no version in use because the user disabled them (the provider no longer offers them)."""
    try:
        registry = _registry(ctx)
        records = registry.all()
    except Exception as exc:  # noqa: BLE001 - the registry's own problems show as a provider error
        ctx.runtime.catalog.errors.setdefault("generated", str(exc))
        return []
    latest: dict[str, Any] = {}
    for r in records:
        if r.name not in latest or r.version > latest[r.name].version:
            latest[r.name] = r
    out = []
    for name, r in sorted(latest.items()):
        if r.status != "disabled" or registry.get(name) is not None:
            continue
        out.append({"name": name, "description": r.spec.get("description", ""), "source": "generated",
                    "provider": "generated",
                    "side_effects": [{"name": e, "description": KNOWN_SIDE_EFFECTS.get(e, "declared by the tool"),
                                      "mode": mode_for_effect(e, ctx.settings.autonomy)} for e in r.side_effects],
                    "untrusted_output": False, "args_schema": _jsonable(r.schema),
                    "metadata": {"version": r.version, "trust": r.trust, "status": r.status},
                    "enabled": False, "can_disable": True})
    return out


ToolName = Path(pattern=r"^[A-Za-z0-9_.:-]{1,256}$", description="a tool name")


class SwitchIn(BaseModel):
    note: str | None = Field(None, max_length=500)


@router.post("/tools/{name}/disable")
def disable_tool(name: str = ToolName, body: SwitchIn | None = None,
                 ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    if _registry(ctx).versions(name):
        return _set_generated(ctx, name, False)
    found, _ = _all_tools(ctx)
    match = next(((t, p) for t, p in found if t.name == name), None)
    if match is None:
        raise HTTPException(404, f"There is no tool {name} (see the Tools view for the names).")
    if match[1] == "meta":
        raise HTTPException(400, f"{name} is part of Jarvis itself (a meta-tool) and cannot be disabled here.")
    switches(ctx).disable(name, body.note if body else None)
    return {"name": name, "enabled": False}


def _set_generated(ctx: AppContext, name: str, enabled: bool) -> dict[str, Any]:
    try:
        make_factory(ctx.settings, sandbox=lambda: ctx.app.sandbox).set_enabled(name, enabled)
    except RegistryError as exc:
        raise HTTPException(400, str(exc)) from None
    in_use = _registry(ctx).get(name)
    return {"name": name, "enabled": in_use is not None, "version": in_use.version if in_use else None}


@router.post("/tools/{name}/enable")
def enable_tool(name: str = ToolName, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    switched = switches(ctx).enable(name)
    if _registry(ctx).versions(name):
        return _set_generated(ctx, name, True)
    if not switched:
        raise HTTPException(409, f"{name} is not disabled; there is nothing to enable.")
    return {"name": name, "enabled": True}


VIEW = View(name="tools", title="Tools", router=router, order=20)
