"""The body of a resume request, shared by threads and jorbs: the user's answers, mapped by answers.py.

The web UI sends `answers` ({interrupt_id: {"answer": approve|edit|deny, "args", "reason"}}): what the user
chose, which `answers.resume_values` turns into resume values (so the browser holds no copy of that mapping, an
in-doubt call's key included). API clients may still send `decisions`, resume values they built themselves,
checked by `answers.check_decision`. An answer names the question it was given to (`ref`), so an old click never
answers a new question parked under the same interrupt id (409).
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from fastapi import HTTPException
from pydantic import BaseModel, Field, model_validator

from orchestrator.tools.answers import AnswerRefused, QuestionChanged, check_decision, resume_values
from orchestrator.tools.executor import Decision


class AnswerIn(BaseModel):
    answer: Literal["approve", "edit", "deny"]
    args: dict[str, Any] | None = None
    reason: str | None = Field(None, max_length=20_000)
    ref: str | None = Field(None, max_length=64, description="the question shown (the item's `ref`): refused when "
                                                           "another one waits under its interrupt id now")


class ResumeIn(BaseModel):
    answers: dict[str, AnswerIn] | None = None
    decisions: dict[str, Decision] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> "ResumeIn":
        if (self.answers is None) == (self.decisions is None):
            raise ValueError("give `answers` (what the user chose) or `decisions` (resume values), one of the two")
        return self

    def ids(self) -> set[str]:
        return set(self.answers or self.decisions or {})

    def refs(self) -> dict[str, str]:
        return {k: v.ref for k, v in (self.answers or {}).items() if v.ref is not None}


def resume_values_for(body: ResumeIn, items: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """{interrupt_id: resume value} for the pending `items`; HTTP 400 saying why when an answer does not fit."""
    try:
        if body.answers is not None:
            return resume_values(items, {k: v.model_dump() for k, v in body.answers.items()})
        values = {}
        for interrupt_id, decision in (body.decisions or {}).items():
            value = decision.model_dump(exclude_none=True)
            check_decision(items[interrupt_id], value)
            values[interrupt_id] = value
        return values
    except QuestionChanged as exc:
        raise HTTPException(409, str(exc)) from None
    except AnswerRefused as exc:
        raise HTTPException(400, str(exc)) from None
