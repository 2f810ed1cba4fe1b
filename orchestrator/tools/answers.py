"""The user's answer to a pending item -> the value the graph is resumed with. Written once, here.

A thread or a jorb parks on an `interrupt()` whose value (an "item", as `jarvis pending`, the API and the jorb
views list it) says what is asked. `item["type"]`:

- `confirmation`, `kind` "confirm": a side effect the autonomy policy asks about (executor.ConfirmationRequest).
  Resumed with {"decision": approve | edit (+ args) | deny (+ reason)}.
- `confirmation`, `kind` "in_doubt": a call that was started and never finished; it may have happened. It can
  only be run again (approved with its own `key`, so an earlier answer can never approve a second run) or
  skipped; an edit is read as "run it again" (its arguments cannot change).
- `jorb_pause`: a jorb's own pause (policy, budget) or a mission's `ask`. Resumed with
  {"type": approve | reject | cancel, "note"}.
- `human_step`: the human policy asks for the jorb's next step. Resumed with {"step": step}.
- `await_reply`: a jorb waits for a message. Resumed with {"type": "wake"} (a reply is queued) or cancel.

Every surface (the CLI's `chat` and `approve` / `deny`, the API, JorbService, the web UI's
confirmation dialog) maps its words to one of ANSWERS and calls `resume_value`: the browser sends its answers
({"answer", "args", "reason"}; `resume_values` maps them), never resume values of its own. Structured decisions
sent to the API by other clients are checked by `check_decision`.

An answer is bound to the question it was given to, not only to where the graph waits: `item_ref` names one
question (thread, interrupt, the call's key, tool and arguments hash, why it is asked again), each pending item
carries it as `ref`, and an answer that names a `ref` (the web UI's do, the phone's tokens are bound to one) is
refused with QuestionChanged when the question now pending under that interrupt id is another one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Mapping

from .ledger import call_fingerprint

Answer = Literal["approve", "edit", "deny", "cancel"]
ANSWERS: tuple[str, ...] = ("approve", "edit", "deny", "cancel")

CANCELLED_REASON = "the jorb was cancelled"


class AnswerRefused(ValueError):
    """The answer does not fit what is asked (said in words, for the CLI, the API and the UI)."""


class QuestionChanged(AnswerRefused):
    """The answer was given to a question that is no longer the one pending under its interrupt id."""


def item_ref(item: Mapping[str, Any]) -> str:
    """The name of one question. A call asked again carries why (`error`: an edit refused, the answer given was
    for another call), so it is another question; the same interrupt id asking about another call (work that
    re-ran from the same checkpoint) is another question too."""
    parts = [item.get("thread_id"), item.get("interrupt_id"), item.get("key"), item.get("kind"),
             call_fingerprint(str(item.get("tool")), item.get("args") or {}), item.get("error")]
    if item.get("type") == "jorb_pause":  # what a pause asks is its reason (a mission's question)
        parts.append(item.get("reason"))
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def with_ref(item: dict[str, Any]) -> dict[str, Any]:
    """The item as it is shown (API, UI, `jarvis pending --json`): with the ref an answer to it names."""
    item["ref"] = item_ref(item)
    return item


def check_ref(item: Mapping[str, Any], ref: str | None) -> None:
    """QuestionChanged when an answer names a question (`ref`) other than the one pending now."""
    if ref is not None and ref != item_ref(item):
        raise QuestionChanged(f"The question under {item.get('interrupt_id')} changed since it was shown (now: "
                              f"{item.get('summary') or item.get('tool') or item.get('type')}); nothing was done. "
                              "Reload and answer what it asks now.")


def is_in_doubt(item: Mapping[str, Any]) -> bool:
    return item.get("type", "confirmation") == "confirmation" and item.get("kind") == "in_doubt"


def resume_value(item: Mapping[str, Any], answer: Answer, *, note: str | None = None,
                 args: dict[str, Any] | None = None) -> Any:
    """The resume value for `answer` to `item`. `note`: the reason of a deny, the note of a jorb pause's answer;
    `args`: the new arguments of an edit."""
    kind = item.get("type", "confirmation")
    if kind == "confirmation":
        if is_in_doubt(item):
            if answer in ("approve", "edit"):
                return {"decision": "approve", "key": item.get("key")}
            return {"decision": "skip"}
        if answer == "approve":
            return {"decision": "approve"}
        if answer == "edit":
            return {"decision": "edit", "args": args}
        return {"decision": "deny", "reason": CANCELLED_REASON if answer == "cancel" else note}
    if kind == "jorb_pause":
        if answer == "cancel":
            return {"type": "cancel"}
        if answer == "edit":
            raise AnswerRefused("a pause is approved or rejected; there is nothing to edit")
        return {"type": "approve" if answer == "approve" else "reject", "note": note}
    if answer == "cancel":  # await_reply, human_step
        return {"type": "cancel"}
    raise AnswerRefused(f"a {kind} is not answered by {answer}")


def resume_values(items: Mapping[str, Mapping[str, Any]], answers: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The user's answers to pending items ({interrupt_id: {"answer", "args", "reason"}}, as the web UI sends
    them) -> {interrupt_id: resume value}; AnswerRefused for an item no longer pending or an answer that does not
    fit it."""
    values: dict[str, Any] = {}
    for interrupt_id, given in answers.items():
        item = items.get(interrupt_id)
        if item is None:
            raise AnswerRefused(f"The confirmation {interrupt_id} is no longer pending; reload to see where it stands.")
        check_ref(item, given.get("ref"))
        answer = given.get("answer")
        if answer not in ANSWERS:
            raise AnswerRefused(f"{answer!r} is not an answer; give one of {', '.join(ANSWERS)}.")
        values[interrupt_id] = resume_value(item, answer, note=given.get("reason"), args=given.get("args"))
        if item.get("type", "confirmation") == "confirmation":
            check_decision(item, values[interrupt_id])
    return values


def step_value(step: dict[str, Any] | str) -> dict[str, Any]:
    """The human policy's answer: the step itself (checked by the caller with jorbs.schema.parse_step)."""
    return {"step": step}


def wake_value() -> dict[str, Any]:
    """Wakes a jorb waiting for a reply (`await_reply`): a reply is queued for it."""
    return {"type": "wake"}


def check_decision(item: Mapping[str, Any], decision: Mapping[str, Any]) -> None:
    """A structured decision ({"decision": approve|edit|deny|skip, "args", "reason", "key"}) sent for a
    confirmation, as the web UI sends them: AnswerRefused when it cannot be used as it is."""
    if is_in_doubt(item):
        if decision.get("decision") == "approve" and decision.get("key") != item.get("key"):
            raise AnswerRefused("To run a call that may already have happened again, approve it with its key "
                                "(the confirmation's `key`).")
        if decision.get("decision") == "edit":
            raise AnswerRefused("A call that may already have happened can only be run again or skipped.")
    if decision.get("decision") == "edit" and not isinstance(decision.get("args"), dict):
        raise AnswerRefused("An edit needs the new arguments as a JSON object in `args`.")
