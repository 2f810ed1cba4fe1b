"""GET /api/tools: every tool the planner can call now, from every provider, with its metadata.

Whatever a tool carries in its metadata is shown: source (static, mcp, generated), side effects with the
autonomy mode each gets, untrusted output, and for generated tools their version, trust and test report when
the registry puts them there. Providers that fail are listed with their error.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends

from integrations.base import KNOWN_SIDE_EFFECTS, is_untrusted, side_effects_of, source_of

from ..autonomy import mode_for_effect
from . import AppContext, View, app_context

router = APIRouter()

_SHOWN_ELSEWHERE = {"side_effects", "untrusted_output", "source", "summarize"}


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def tool_view(tool: Any, ctx: AppContext, provider: str | None = None) -> dict[str, Any]:
    meta = tool.metadata or {}
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
        "metadata": {k: _jsonable(v) for k, v in meta.items() if k not in _SHOWN_ELSEWHERE and not callable(v)},
    }


@router.get("/tools")
def list_tools(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    catalog = ctx.runtime.catalog
    tools: list[dict[str, Any]] = []
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
                tools.append(tool_view(tool, ctx, provider.name))
    for tool in ctx.runtime.meta_tools:
        if tool.name not in seen:
            tools.append(tool_view(tool, ctx, "meta"))
    return {"tools": tools, "provider_errors": dict(catalog.errors)}


VIEW = View(name="tools", title="Tools", router=router, order=20)
