"""The jorb's step output (seed 000's "New Jorb Output Format"), its graph state, and the records it keeps."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from orchestrator.core import json_bounds

class JorbStatus(StrEnum):
    """Where a jorb stands. The store refuses any other value (JorbStore.update)."""

    PLANNING = "planning"  # created, or deciding its next step
    RUNNING = "running"  # running a step's script
    AWAITING_REPLY = "awaiting_reply"  # parked until a message (or the user's own step) comes
    PAUSED = "paused"  # parked until the user approves (its own pause, a confirmation, a mission's question)
    DONE = "done"
    FAILED = "failed"  # a step broke; `retry` runs it again
    CANCELLED = "cancelled"


OPEN_STATUSES = (JorbStatus.PLANNING, JorbStatus.RUNNING, JorbStatus.AWAITING_REPLY, JorbStatus.PAUSED)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class JorbStep(BaseModel):
    """What the policy decides for one step."""

    reasoning: str = ""
    script: str | None = None
    await_reply: bool = False
    done: bool = False
    pause: bool = False
    pause_reason: str | None = None
    result: Any = None

    @model_validator(mode="after")
    def _consistent(self) -> "JorbStep":
        if self.script is not None and not self.script.strip():
            self.script = None
        if self.done and self.pause:
            raise ValueError("'done' and 'pause' cannot both be true")
        if self.done and self.await_reply:
            raise ValueError("'done' and 'await_reply' cannot both be true")
        if self.pause and not (self.pause_reason or "").strip():
            raise ValueError("'pause' needs a 'pause_reason' saying what the user should decide")
        if not (self.script or self.done or self.pause or self.await_reply):
            raise ValueError("the step does nothing: give a 'script', or set 'done', 'pause' or 'await_reply'")
        return self


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def parse_step(text: str) -> JorbStep:
    """Parse a model reply into a JorbStep: a JSON object, possibly fenced or surrounded by prose.
    Raises ValueError with a message the model can act on."""
    candidates = [m.group(1) for m in _FENCE.finditer(text or "")]
    start, end = (text or "").find("{"), (text or "").rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start:end + 1])
    candidates.append(text or "")
    last_error: Exception | None = None
    for candidate in candidates:
        try:
            data = json_bounds.loads(candidate)
        except ValueError as exc:  # not JSON, or nested too deep (json_bounds.TooDeep)
            last_error = exc
            continue
        if not isinstance(data, dict):
            last_error = ValueError(f"expected a JSON object, got {type(data).__name__}")
            continue
        try:
            return JorbStep.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'step'}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"the JSON does not match the response format: {problems}") from None
    raise ValueError(f"the reply is not a JSON object ({last_error})")


class HistoryEntry(BaseModel):
    """One message of the jorb's conversation: sent by Jarvis, from a counterpart, or from the user."""

    role: Literal["jarvis", "counterpart", "user"]
    channel: str
    party: str  # the counterpart (to / from); "user" for the user's own interventions
    text: str
    at: str = Field(default_factory=now_iso)


class ScriptResult(BaseModel):
    """Seed 000's "Script Result History" entry."""

    step: int
    script: str
    result: Any = None
    error: str | None = None
    output: str | None = None  # what the script printed
    timestamp: str = Field(default_factory=now_iso)


class JorbState(BaseModel):
    jorb_id: str
    step: int = 0
    history: list[HistoryEntry] = Field(default_factory=list)
    script_results: list[ScriptResult] = Field(default_factory=list)
    current_event: dict[str, Any] | None = None
    decision: JorbStep | None = None
    hold_kind: str | None = None  # why the jorb holds when Jarvis (not the policy) paused it: rate_hour, tokens...
    step_times: list[float] = Field(default_factory=list)  # unix times of model steps (rate limits)
    tokens_used: int = 0
    # A script of an earlier step read content from outside (a note, a page, a message): it stays in the history
    # the model plans from, so every later effect of the jorb is escalated (ask first).
    untrusted: bool = False
    # A counterpart wrote (or an event came): its words are in the history too. Every later effect asks first,
    # except a message to someone the task names: a contact it was created with, an address in its plan, or
    # whom it wrote to before anything from outside reached it (`task_parties`); talking to them is the task
    # (jorbs/graph.py).
    counterpart_seen: bool = False
    task_parties: list[str] = Field(default_factory=list)
    extra_steps_hour: int = 0  # granted by the user after a rate-limit pause
    extra_steps_day: int = 0
    extra_tokens: int = 0
    # The model was down (jorbs/retry.py): since when, how many tries failed, when the next one is due.
    model_down_since: float | None = None
    model_failures: int = 0
    retry_at: float | None = None
    outcome: Literal["done", "failed", "cancelled"] | None = None
    result: Any = None
    error: str | None = None
