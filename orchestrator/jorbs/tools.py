"""Planner tools for jorbs: start one from the chat (`jorb_create`, side effect `jorb_create`) and look at them
(`jorb_list`, whose output is outside content: what a jorb reports was written after reading its counterparts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from integrations.base import ToolError, make_tool

from orchestrator.core.config import AutonomyConfig, Mode
from orchestrator.tools.autonomy import looser, mode_for_effect
from orchestrator.tools.executor import read_outside_content
from .service import JorbError, JorbService


class CreateArgs(BaseModel):
    # an empty name is refused before the user is asked (a tiny model answered "hello" with a nameless jorb)
    name: str = Field(min_length=1, pattern=r"\S", description="a short name, e.g. 'Book Paris hotel via Magic'")
    plan: str = Field(description="the task in detail: who to contact, what to find out, when to stop, what needs the user's approval")
    contacts: list[str] = Field(default_factory=list, description="people the jorb talks to (emails, @handles, phone numbers)")
    autonomy: dict[str, Mode] = Field(default_factory=dict,
                                      description="optional: effects this jorb may do without asking, e.g. {'message_send': 'auto'}")


class ListArgs(BaseModel):
    pass


def _summary(args: dict[str, Any]) -> str:
    text = f"Start the long-running task {args.get('name')!r}: {str(args.get('plan'))[:200]}"
    if args.get("autonomy"):
        granted = ", ".join(f"{k}={v}" for k, v in args["autonomy"].items())
        text += f" It may act without asking for: {granted} (its own calls only)."
    return text


def loosened(autonomy: dict[str, str] | None, config: AutonomyConfig) -> list[str]:
    """The effects an override lets the new jorb do more freely than the config does: `auto` where the config asks,
    and `confirm` where it denies (a denied effect then only needs a yes, maybe from a phone)."""
    return sorted(effect for effect, mode in (autonomy or {}).items() if looser(mode, mode_for_effect(effect, config)))


def build_jorb_tools(service: Callable[[], JorbService], autonomy: AutonomyConfig) -> list[BaseTool]:
    """`service` returns the process's JorbService (App.jorbs), asked on each call; `autonomy`: the config's
    policy, which a new jorb's overrides may only loosen with the user's yes."""

    def grants_autonomy(args: dict[str, Any]) -> str | None:
        """A jorb's overrides hold for as long as it runs: only the user loosens the policy, whatever
        jorb_create's own mode (an automatic jorb_create must not hand out automatic sends)."""
        granted = loosened(args.get("autonomy"), autonomy)
        return (f"it lets the new task do {', '.join(granted)} more freely than your settings do: only you can grant "
                "that") if granted else None

    def jorb_create(name: str, plan: str, contacts: list[str] | None = None, autonomy: dict[str, str] | None = None,
                    config: RunnableConfig = None) -> dict[str, Any]:
        """Start a long-running task (a jorb) that works in the background, messages people, waits for their
        replies for as long as it takes, and pauses for the user's approval where the plan says so."""
        origin = str(((config or {}).get("configurable") or {}).get("thread_id") or "") or None
        try:
            # started from a turn that had read outside content, the plan may be that content's: the jorb's own
            # effects ask first from its first step, as they would have in the turn
            view = service().create(name, plan, contacts=contacts, autonomy=autonomy, origin_thread=origin,
                                    background=True, untrusted=read_outside_content(config))
        except JorbError as exc:
            raise ToolError(str(exc)) from None
        return {"jorb_id": view.row.id, "status": view.row.status,
                "note": "The jorb runs in the background; `jarvis jorbs show ID` follows it."}

    def jorb_list() -> list[dict[str, Any]]:
        """The open long-running tasks (jorbs) with their status and what they wait for."""
        return [{"id": r.id, "name": r.name, "status": r.status, "waiting_for": r.waiting_party,
                 "pause_reason": r.pause_reason} for r in service().list()]

    create = make_tool(jorb_create, args_schema=CreateArgs, side_effects=["jorb_create"], summarize=_summary,
                       requires_confirmation=grants_autonomy, not_for_scripts=True,
                       trusted_output="the id and status of the jorb this call created")
    # A jorb's status text is written by its own model, which reads its counterparts' replies (a pause's reason
    # can quote them): the listing is outside content (the default), and a thread that read it asks before its effects.
    listing = make_tool(jorb_list, args_schema=ListArgs, not_for_scripts=True)
    return [create, listing]
