"""The switchboard's judgement (as frank_bot's does it): when the exact sender match finds no jorb or several,
one call to the primary model sees the message and a one-line summary of each open jorb, and answers with a
jorb id, a confidence and flags. Low confidence goes to the user (the inbox), never to a guess."""

from __future__ import annotations

import logging
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field, ValidationError

from orchestrator.core import json_bounds
from orchestrator.core.errors import ModelEndpointError
from orchestrator.llm.answer_end import checked_reply

log = logging.getLogger(__name__)

MAX_CANDIDATES = 60

Flag = Literal["spam", "urgent", "unknown_sender", "new_task"]


class SwitchboardDecision(BaseModel):
    jorb_id: str | None = None
    confidence: float = Field(0.0, ge=0, le=1)
    flags: list[Flag] = Field(default_factory=list)
    reasoning: str = ""


SYSTEM = """You route an incoming message to the long-running task (jorb) it belongs to.
Answer with JSON only: {"jorb_id": "<id or null>", "confidence": 0.0-1.0, "flags": [...], "reasoning": "one sentence"}
flags may contain: "spam", "urgent", "unknown_sender", "new_task" (the message asks for something no jorb covers).
Choose a jorb only if the message clearly continues its conversation; otherwise jorb_id null."""


def summarize_jorb(row: Any) -> str:
    waiting = f", waiting for {row.waiting_party} on {row.waiting_channel}" if row.status == "awaiting_reply" else ""
    contacts = ", ".join(row.contacts[:5]) or "none"
    return f"- {row.id}: {row.name} [{row.status}{waiting}] contacts: {contacts}; plan: {row.plan[:140]}"


def judge(llm: Any, channel: str, sender: str, text: str, candidates: list[Any]) -> SwitchboardDecision:
    listed = "\n".join(summarize_jorb(r) for r in candidates[:MAX_CANDIDATES]) or "(no open jorbs)"
    human = (f"Message on {channel} from {sender}:\n\"\"\"{text[:2000]}\"\"\"\n\nOpen jorbs:\n{listed}")
    try:
        reply = checked_reply(llm.invoke([SystemMessage(content=SYSTEM), HumanMessage(content=human)]), llm,
                              "the switchboard's routing of a message")
    except Exception as exc:  # noqa: BLE001 - without the model the message waits in the inbox
        log.warning("switchboard model call failed: %s", exc)
        why = (str(exc) if isinstance(exc, ModelEndpointError)
               else f"the switchboard model could not be asked ({type(exc).__name__})")
        return SwitchboardDecision(reasoning=f"{why}; the message waits for you in the inbox")
    content = reply.content if isinstance(reply.content, str) else str(reply.content)
    start, end = content.find("{"), content.rfind("}")
    try:
        decision = SwitchboardDecision.model_validate(json_bounds.loads(content[start:end + 1]))
    except (ValueError, ValidationError) as exc:
        return SwitchboardDecision(reasoning=f"the switchboard's answer could not be read ({exc.__class__.__name__})")
    known = {r.id for r in candidates}
    if decision.jorb_id is not None and decision.jorb_id not in known:
        decision.reasoning = f"the model named {decision.jorb_id!r}, which is not an open jorb. {decision.reasoning}"
        decision.jorb_id = None
        decision.confidence = 0.0
    return decision
