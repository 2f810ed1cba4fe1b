"""orchestrator/tools/answers.py: every kind of pending item, every answer, one resume value each."""

from __future__ import annotations

import pytest

from orchestrator.tools.answers import (AnswerRefused, check_decision, item_ref, resume_value, step_value,
                                        wake_value)
from orchestrator.tools.executor import parse_decision

CONFIRM = {"type": "confirmation", "kind": "confirm", "key": "t|k1"}
IN_DOUBT = {"type": "confirmation", "kind": "in_doubt", "key": "t|k2"}
PAUSE = {"type": "jorb_pause", "kind": "policy"}
ASK = {"type": "jorb_pause", "kind": "ask"}  # a mission's question
STEP = {"type": "human_step"}
WAITING = {"type": "await_reply"}


@pytest.mark.parametrize(("item", "answer", "kwargs", "value"), [
    (CONFIRM, "approve", {}, {"decision": "approve"}),
    (CONFIRM, "edit", {"args": {"a": 1}}, {"decision": "edit", "args": {"a": 1}}),
    (CONFIRM, "deny", {"note": "not now"}, {"decision": "deny", "reason": "not now"}),
    (CONFIRM, "cancel", {}, {"decision": "deny", "reason": "the jorb was cancelled"}),
    # an in-doubt call is approved with its own key (never by an earlier answer), or skipped
    (IN_DOUBT, "approve", {}, {"decision": "approve", "key": "t|k2"}),
    (IN_DOUBT, "edit", {"args": {"a": 1}}, {"decision": "approve", "key": "t|k2"}),
    (IN_DOUBT, "deny", {"note": "no"}, {"decision": "skip"}),
    (IN_DOUBT, "cancel", {}, {"decision": "skip"}),
    (PAUSE, "approve", {"note": "go"}, {"type": "approve", "note": "go"}),
    (PAUSE, "deny", {}, {"type": "reject", "note": None}),
    (ASK, "approve", {"note": "use main.py"}, {"type": "approve", "note": "use main.py"}),
    (ASK, "cancel", {}, {"type": "cancel"}),
    (STEP, "cancel", {}, {"type": "cancel"}),
    (WAITING, "cancel", {}, {"type": "cancel"}),
])
def test_each_item_and_answer_has_one_resume_value(item, answer, kwargs, value):
    assert resume_value(item, answer, **kwargs) == value


def test_confirmation_values_read_back_as_the_executor_decides():
    assert parse_decision(resume_value(IN_DOUBT, "approve")).key == "t|k2"
    assert parse_decision(resume_value(IN_DOUBT, "deny")).decision == "skip"
    assert parse_decision(resume_value(CONFIRM, "deny", note="x")).reason == "x"


def test_answers_that_do_not_fit_are_refused():
    with pytest.raises(AnswerRefused):
        resume_value(PAUSE, "edit")
    with pytest.raises(AnswerRefused):
        resume_value(STEP, "approve")
    assert step_value({"done": True}) == {"step": {"done": True}}
    assert wake_value() == {"type": "wake"} and wake_value() is not wake_value()


@pytest.mark.parametrize(("item", "decision"), [
    (IN_DOUBT, {"decision": "approve", "key": "t|k2"}),
    (IN_DOUBT, {"decision": "skip"}),
    (CONFIRM, {"decision": "approve"}),
    (CONFIRM, {"decision": "edit", "args": {"a": 1}}),
    (CONFIRM, {"decision": "deny", "reason": "no"}),
])
def test_structured_decisions_that_fit_pass(item, decision):
    check_decision(item, decision)


@pytest.mark.parametrize(("item", "decision", "why"), [
    (IN_DOUBT, {"decision": "approve"}, "approve it with its key"),
    (IN_DOUBT, {"decision": "approve", "key": "t|k1"}, "approve it with its key"),
    (IN_DOUBT, {"decision": "edit", "args": {}}, "can only be run again or skipped"),
    (CONFIRM, {"decision": "edit"}, "needs the new arguments"),
    (CONFIRM, {"decision": "edit", "args": [1]}, "needs the new arguments"),
])
def test_structured_decisions_that_do_not_fit_are_refused(item, decision, why):
    with pytest.raises(AnswerRefused, match=why):
        check_decision(item, decision)


def test_the_ui_sends_answers_and_the_server_maps_them():
    # The browser's confirm.js held its own copy of the answer -> resume value mapping (an in-doubt call's key
    # included); it now sends what the user chose and answers.resume_values maps it, once.
    import pytest

    from orchestrator.tools.answers import AnswerRefused, resume_values

    items = {"a": {"type": "confirmation", "kind": "confirm"},
             "b": {"type": "confirmation", "kind": "in_doubt", "key": "k-1"}}
    assert resume_values(items, {"a": {"answer": "approve"}, "b": {"answer": "approve"}}) == {
        "a": {"decision": "approve"}, "b": {"decision": "approve", "key": "k-1"}}
    assert resume_values(items, {"a": {"answer": "deny", "reason": "no"}, "b": {"answer": "deny"}}) == {
        "a": {"decision": "deny", "reason": "no"}, "b": {"decision": "skip"}}
    assert resume_values(items, {"a": {"answer": "edit", "args": {"path": "x"}}}) == {
        "a": {"decision": "edit", "args": {"path": "x"}}}
    with pytest.raises(AnswerRefused, match="arguments"):
        resume_values(items, {"a": {"answer": "edit"}})
    with pytest.raises(AnswerRefused, match="no longer pending"):
        resume_values(items, {"gone": {"answer": "approve"}})


def test_a_pause_asking_something_else_under_the_same_interrupt_is_another_question():
    """A jorb's pause (or a mission's question) asks what its reason says: the step re-run from the same checkpoint
    (a retry) may pause on the same interrupt id with another reason, and an answer to the first must not apply."""
    shown = {**ASK, "thread_id": "jorb:j1", "interrupt_id": "i1", "reason": "May I delete the old backups?"}
    later = {**shown, "reason": "May I delete every file in ~/Documents?"}
    assert item_ref(shown) != item_ref(later)
    assert item_ref(shown) == item_ref(dict(shown))
    # a confirmation's ref is what it was: its why (`reason`) is not what is approved
    call = {**CONFIRM, "thread_id": "t", "interrupt_id": "i2", "tool": "fs_write_text", "args": {"path": "a"}}
    assert item_ref({**call, "reason": "one"}) == item_ref({**call, "reason": "two"})
