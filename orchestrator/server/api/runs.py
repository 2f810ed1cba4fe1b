"""GET /api/runs, GET /api/runs/{id}: each run's node timeline, model and tool calls (orchestrator.storage.telemetry);
`jorb_id` names the jorb of a jorb's run (its thread is the jorb's, not a conversation)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from orchestrator.core.ids import conversation_of
from orchestrator.storage.telemetry import get_run, list_runs
from orchestrator.storage.threads import ThreadIndex
from . import AppContext, View, app_context

router = APIRouter()

_RUN_FIELDS = ("id", "thread_id", "graph", "started_at", "duration_ms", "status", "error", "prompt_tokens",
               "completion_tokens", "model_calls", "unreported_calls", "model_ms", "tool_calls", "tool_errors")


def _run(row: Any) -> dict[str, Any]:
    out = {f: getattr(row, f) for f in _RUN_FIELDS}
    out["started_at"] = row.started_at.isoformat() if row.started_at else None
    out["outcome"] = row.outcome_text()  # what the view shows: not "ok" beside failed tool calls
    out["jorb_id"] = conversation_of(row.thread_id).jorb_id  # a jorb's run is shown in the Jorbs view, not as a chat thread
    return out


def _detail(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@router.get("/runs")
def runs(limit: int = 50, thread_id: str | None = None, ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
    rows = [_run(r) for r in list_runs(ctx.settings, limit=max(1, min(limit, 500)), thread_id=thread_id)]
    index = ThreadIndex(ctx.settings)
    titles: dict[str, str] = {}
    for row in rows:  # people know their threads by title, not id
        tid = row.get("thread_id")
        if tid and tid not in titles:
            info = index.get(tid)
            titles[tid] = info.title if info is not None else ""
        row["thread_title"] = titles.get(tid or "", "")
    return rows


@router.get("/runs/{run_id}")
def run_detail(run_id: str, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    found = get_run(ctx.settings, run_id)
    if found is None:
        raise HTTPException(404, f"There is no run {run_id}.")
    row, events = found
    return {**_run(row), "events": [{"seq": e.seq, "kind": e.kind, "name": e.name, "offset_ms": e.offset_ms,
                                     "duration_ms": e.duration_ms, "ok": bool(e.ok), "detail": _detail(e.detail)}
                                    for e in events]}


VIEW = View(name="runs", title="Runs", router=router, order=30)
