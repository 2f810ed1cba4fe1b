"""The Memory view (orchestrator/memory): browse by entity, search, edit, delete, see where each fact came from.

  GET    /api/memory[?kind=person]          {"entities", "stats", "kinds"}
  GET    /api/memory/facts[?q=...&limit=]   the latest facts, or those matching q
  GET    /api/memory/entities/{id}          an entity with its facts and relations
  POST   /api/memory/facts                  {"fact", "about", "kind", "expires"}: written by the user (trusted)
  PATCH  /api/memory/facts/{id}             {"fact", "expires"} ("expires": "" clears it)
  DELETE /api/memory/facts/{id}             forgotten: the row, its search index entry and its vector
  DELETE /api/memory/entities/{id}          the entity, every fact about it and its relations
  GET    /api/memory/proposals              facts proposed from finished turns, waiting for the user
  POST   /api/memory/proposals/{id}/accept  remembered (source `extraction`); .../reject drops it

What the user writes here is theirs (source `manual`, trusted); the view is hidden when memory.enabled is false.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path
from pydantic import BaseModel, Field

from integrations.base import ToolError
from orchestrator.memory import MemoryError, MemoryStore, Provenance, SourceKind
from orchestrator.memory.extraction import answer_proposal, proposals
from orchestrator.memory.tools import parse_expiry
from . import AppContext, View, app_context

router = APIRouter(prefix="/memory")
BY_HAND = Provenance(SourceKind.MANUAL, True, "the Memory view")
# One Path per name: FastAPI binds a Path object to the first parameter that uses it.
FactId = Path(ge=1, le=2**62, description="a fact id")
EntityId = Path(ge=1, le=2**62, description="an entity id")
ProposalId = Path(ge=1, le=2**62, description="a proposal id")


def _store(ctx: AppContext) -> MemoryStore:
    store = ctx.app.memory
    if store is None:
        raise HTTPException(404, "Memory is turned off (memory.enabled: false in the config).")
    return store


def _expiry(value: str | None) -> Any:
    try:
        return parse_expiry(value)
    except ToolError as exc:
        raise HTTPException(400, str(exc)) from None


def _fact(view: Any) -> dict[str, Any]:
    return {**view.as_dict(), "source": view.source}


@router.get("")
def overview(kind: str | None = None, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    store = _store(ctx)
    return {"entities": store.entities(kind=kind or None), "stats": store.stats(), "kinds": store.kinds}


@router.get("/facts")
def facts(q: str = "", limit: int = 100, ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
    store = _store(ctx)
    limit = max(1, min(limit, 500))
    found = store.search(q[:500], limit, include_expired=True) if q.strip() else store.facts(limit=limit)
    return [_fact(v) for v in found]


@router.get("/entities/{entity_id}")
def entity(entity_id: int = EntityId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    store = _store(ctx)
    found = store.about(entity_id)
    if found is None:
        raise HTTPException(404, f"No entity {entity_id}.")
    found["facts"] = [_fact(store.get(f["id"])) for f in found["facts"]]
    return found


class FactIn(BaseModel):
    fact: str = Field(..., max_length=1000)
    about: str | None = Field(None, max_length=200)
    kind: str | None = Field(None, max_length=32)
    expires: str | None = Field(None, max_length=40)


class FactPatch(BaseModel):
    fact: str | None = Field(None, max_length=1000)
    expires: str | None = Field(None, max_length=40)


@router.post("/facts", status_code=201)
def add_fact(body: FactIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    try:
        return _fact(_store(ctx).remember(body.fact, BY_HAND, about=(body.about or "").strip() or None,
                                          kind=body.kind or None, expires_at=_expiry(body.expires)))
    except MemoryError as exc:
        raise HTTPException(400, str(exc)) from None


@router.patch("/facts/{fact_id}")
def edit_fact(body: FactPatch, fact_id: int = FactId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    store = _store(ctx)
    if store.get(fact_id) is None:
        raise HTTPException(404, f"No fact {fact_id}.")
    clear = body.expires is not None and not body.expires.strip()
    try:
        return _fact(store.update(fact_id, BY_HAND, fact=body.fact, expires_at=None if clear else _expiry(body.expires),
                                  clear_expiry=clear))
    except MemoryError as exc:
        raise HTTPException(400, str(exc)) from None


@router.delete("/facts/{fact_id}")
def forget_fact(fact_id: int = FactId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    view = _store(ctx).forget(fact_id)
    if view is None:
        raise HTTPException(404, f"No fact {fact_id}.")
    return {"forgotten": view.id}


@router.delete("/entities/{entity_id}")
def forget_entity(entity_id: int = EntityId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    gone = _store(ctx).forget_entity(entity_id)
    if gone is None:
        raise HTTPException(404, f"No entity {entity_id}.")
    return {"forgotten": gone[0], "facts": gone[1]}


@router.get("/proposals")
def list_proposals(ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
    return proposals(_store(ctx))


@router.post("/proposals/{proposal_id}/{answer}")
def answer(answer: Literal["accept", "reject"], proposal_id: int = ProposalId,
           ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    try:
        return answer_proposal(_store(ctx), proposal_id, answer == "accept")
    except MemoryError as exc:
        raise HTTPException(409 if "already" in str(exc) else 404, str(exc)) from None


VIEW = View(name="memory", title="Memory", router=router, order=45,
            available=lambda ctx: ctx.settings.memory.enabled)
