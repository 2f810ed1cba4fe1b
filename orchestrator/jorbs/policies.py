"""Step deciders of jorbs. Every policy has one signature (seed 003, PocketJoe):

    async def policy(ctx, observations, options=None, **kwargs) -> list[Message]

`observations` are the messages the caller chose (the jorb prompt and its current event); the policy returns the
actions it selected as messages: the last one's content is the step JSON. An LLM, a person or plain Python can
decide, so a routine can go human -> heuristic -> model as it matures.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from orchestrator.llm.answer_end import checked_reply
from orchestrator.llm.client import describe_endpoint_error, model_config

Message = BaseMessage
Policy = Callable[..., Awaitable[list[Message]]]


@dataclass
class PolicyContext:
    """What a policy may use: the jorb, the settings, the model factory and the capabilities it may call."""

    settings: Any
    jorb: dict[str, Any]
    capabilities: str
    llm: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


async def llm_policy(ctx: PolicyContext, observations: list[Message], options: list[str] | None = None,
                     **kwargs: Any) -> list[Message]:
    """The primary model decides (the default of every jorb)."""
    try:
        reply = await ctx.llm.ainvoke(observations)
        reply = checked_reply(reply, ctx.llm, "the jorb's next step")  # a step cut short is not run
    except Exception as exc:
        err = describe_endpoint_error(exc, model_config(ctx.settings, "primary")[1].base_url)
        if err is not None:
            raise err from None
        raise
    return [reply if isinstance(reply, AIMessage) else AIMessage(content=str(reply.content))]


async def human_policy(ctx: PolicyContext, observations: list[Message], options: list[str] | None = None,
                       **kwargs: Any) -> list[Message]:
    """The user decides the step: the jorb waits for their answer like a reply (an interrupt)."""
    from langgraph.types import interrupt

    answer = interrupt({
        "type": "human_step", "jorb_id": ctx.jorb["id"], "name": ctx.jorb["name"],
        "prompt": observations[-1].content if observations else "",
        "format": "the step JSON (reasoning, script, await_reply, done, pause, pause_reason, result)",
    })
    if isinstance(answer, dict) and "step" in answer:
        answer = answer["step"]
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return [AIMessage(content=text, name="human")]


HEURISTICS: dict[str, Policy] = {}


def heuristic(name: str) -> Callable[[Policy], Policy]:
    """Register a plain-Python policy under `heuristic:<name>`."""

    def register(fn: Policy) -> Policy:
        HEURISTICS[name] = fn
        return fn

    return register


def resolve_policy(name: str) -> Policy:
    if name in ("llm", "model"):
        return llm_policy
    if name == "human":
        return human_policy
    if name.startswith("heuristic:"):
        key = name.split(":", 1)[1]
        if key not in HEURISTICS:
            _load_heuristic_module(key)
        if key in HEURISTICS:
            return HEURISTICS[key]
        raise ValueError(f"no heuristic policy {key!r} (known: {', '.join(sorted(HEURISTICS)) or 'none'})")
    raise ValueError(f"unknown policy {name!r}: use 'llm', 'human' or 'heuristic:<name>'")


def _load_heuristic_module(key: str) -> None:
    """`heuristic:package.module:function` loads a user's own decider by import path."""
    import importlib

    if ":" in key:
        module_name, func = key.rsplit(":", 1)
        module = importlib.import_module(module_name)
        HEURISTICS[key] = getattr(module, func)
