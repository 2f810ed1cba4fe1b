"""The confirm step of a tool call: what the user is asked, the answers understood, and the asking until an answer
settles the call (tools/executor.py runs it when `autonomy.decide` says confirm).

An answer settles a call only when it was given to this very call: the work may have re-run (a jorb script, a mission
round) and now ask something else at the same point, and a call's summary is read from the world (the draft a send
sends), so a yes to what was shown before approves nothing now. Every question is recorded in the effects ledger
before the work parks on it, so a resumed process knows what was asked.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from orchestrator.core.visible import elide, visible
from .ledger import AskedCall, EffectsLedger, call_fingerprint


@dataclass
class ConfirmationRequest:
    """What the user is asked. `kind`: confirm (policy), in_doubt (may have happened), budget is a confirm."""

    kind: Literal["confirm", "in_doubt"]
    thread_id: str
    tool: str
    args: dict[str, Any]
    side_effects: list[str]
    summary: str
    reason: str
    escalated: bool
    key: str
    error: str | None = None  # why an edit was refused, when asking again
    editable: bool = True  # False: approve or deny only (registering a tool: the code shown is the code tested)

    def __post_init__(self) -> None:
        # What the person reads before answering, wherever they read it (terminal, web UI, phone): a value from a
        # file or a model's call must not rewrite, reorder or hide it (core/visible.py). The arguments stay as they
        # are: they are what runs, and each place that shows them shows them visibly.
        self.summary = visible(self.summary, one_line=True)
        self.reason = visible(self.reason, one_line=True)
        self.error = visible(self.error, one_line=True) if self.error else self.error

    def payload(self) -> dict[str, Any]:
        return {
            "type": "confirmation",
            "kind": self.kind,
            "thread_id": self.thread_id,
            "tool": self.tool,
            "args": self.args,
            "side_effects": self.side_effects,
            "summary": self.summary,
            "reason": self.reason,
            "escalated": self.escalated,
            "key": self.key,
            "error": self.error,
            "choices": ["approve", "edit", "deny"] if self.kind == "confirm" and self.editable else ["approve", "deny"],
        }


class Decision(BaseModel):
    decision: Literal["approve", "edit", "deny", "skip"]
    args: dict[str, Any] | None = None
    reason: str | None = None
    key: str | None = None  # approving an in-doubt call must name it (see ToolExecutor._in_doubt)


def parse_decision(value: Any) -> Decision:
    """Accept the documented resume shapes, and plain 'approve' / 'deny' strings; anything else denies."""
    if isinstance(value, Decision):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in {"approve", "yes", "y", "ok"}:
            return Decision(decision="approve")
        if word in {"skip"}:
            return Decision(decision="skip")
        return Decision(decision="deny", reason=None if word in {"deny", "no", "n"} else f"unrecognized answer {value!r}")
    if isinstance(value, dict):
        try:
            return Decision.model_validate(value)
        except ValidationError as exc:
            return Decision(decision="deny", reason=f"unrecognized resume value: {exc.errors()[0]['msg']}")
    return Decision(decision="deny", reason=f"unrecognized resume value {value!r}")


Confirm = Callable[[ConfirmationRequest], Any]


@dataclass(frozen=True)
class Denied:
    """The user denied (or skipped) the call; `reason` is theirs, if they gave one."""

    reason: str | None


Validate = Callable[[dict[str, Any]], tuple[dict[str, Any] | None, str | None]]


def settle(request: ConfirmationRequest, confirm: Confirm, ledger: EffectsLedger, made: str,
           validate: Validate, asked_at: datetime | None = None) -> dict[str, Any] | Denied:
    """Ask `request` until an answer settles it: the arguments to run (as shown, or as edited and valid), or Denied.
    `made`: the call's fingerprint as the work made it, before any edit. `asked_at`: the moment the call's
    arguments were fixed at (ToolMeta.fix_args), recorded as the first question's time (default: the clock)."""
    valid = request.args
    asked = ledger.asked(request.key)
    for seq in itertools.count():
        if seq >= len(asked):  # a new question: recorded before the work parks on it
            ledger.record_asked(request.key, seq, made, request.summary, asked_at=asked_at)
            asked.append(AskedCall(made, request.summary, asked_at))
        answer = parse_decision(confirm(request))
        if answer.decision in ("approve", "edit") and asked[seq].fingerprint != made:
            # This answer was given to another call asked at this point (the work re-ran and now makes
            # a different call): it approves nothing here. Ask about this call, saying what changed.
            request.error = (f"the answer given was for another call ({asked[seq].summary}); "
                             f"this call is different: {request.summary}")
            continue
        same_call = answer.decision == "approve" or (
            answer.decision == "edit" and call_fingerprint(request.tool, answer.args or {}) == made)  # saved unchanged
        if same_call and asked[seq].summary != request.summary:
            # The same call, but what it does reads differently now: its summary is read from the world
            # (the draft gmail_send_draft sends, changed in Gmail since the question). The yes was for
            # what was shown; ask about what would run.
            request.error = (f"what this call does changed since you were asked: it was "
                             f"\"{asked[seq].summary}\"; it is now \"{request.summary}\"")
            continue
        if answer.decision == "approve":
            break
        if answer.decision == "edit" and not request.editable:
            request.error = f"{request.tool} cannot be run with other arguments: approve or deny it as shown"
            continue
        if answer.decision in ("deny", "skip"):
            ledger.forget_asked(request.key)
            return Denied(answer.reason)
        edited, problem = validate(answer.args or {})
        if edited is None:
            # Asked again about the call as it would run: what is shown is what an approve runs, never the
            # refused edit (an approve of that would have run the original arguments under it).
            tried = elide(json.dumps(answer.args or {}, ensure_ascii=False, default=str), 300)
            request.error = visible(f"the edited arguments are not valid: {problem}; your edit ({tried}) was "
                                    "not used, and the call is shown again as it would run", one_line=True)
            continue
        valid = edited
        break
    ledger.forget_asked(request.key)
    return valid
