"""A reminder's time in the words people (and small models) write: "tomorrow at 9am", "in 20 minutes".

The built-in models got ISO dates wrong ("tomorrow at 9am" became today, or a date weeks off) while copying the
user's words is what they do best; Jarvis reads the words (dateparser) on the user's clock. Words mean another time
tomorrow, so the executor fixes them to the instant once, before the user is asked (ToolMeta.fix_args), at the
moment the question is recorded: the approval, however late, runs what the question showed.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict
from zoneinfo import ZoneInfo

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from orchestrator.core.config import settings_from_dict
from orchestrator.reminders import ReminderStore
from orchestrator.reminders.recurrence import RecurrenceError, parse_when
from orchestrator.reminders.tools import build_reminder_tools
from orchestrator.tools import executor as executor_module
from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from orchestrator.tools.executor import CallContext, ToolExecutor

PARIS = ZoneInfo("Europe/Paris")
WEDNESDAY_EVENING = datetime(2026, 12, 2, 21, 30, tzinfo=timezone.utc)  # 22:30 in Paris


@pytest.mark.parametrize("words, meant", [
    ("tomorrow at 9am", datetime(2026, 12, 3, 9, 0)),
    ("in 20 minutes", datetime(2026, 12, 2, 22, 50)),
    ("9am", datetime(2026, 12, 3, 9, 0)),  # late in the evening: the next 9am, not this morning's
    ("friday 6pm", datetime(2026, 12, 4, 18, 0)),
    ("next friday at 18:00", datetime(2026, 12, 4, 18, 0)),
    ("on Monday", datetime(2026, 12, 7, 9, 0)),  # a day without a time: in the morning, not at midnight
    ("2026-12-24T08:00", datetime(2026, 12, 24, 8, 0)),  # ISO as before, local when it has no offset
])
def test_words_for_a_time_are_read_on_the_users_clock(words, meant):
    assert parse_when(words, PARIS, WEDNESDAY_EVENING) == meant.replace(tzinfo=PARIS).astimezone(timezone.utc)


@pytest.mark.parametrize("words", ["soonish", "1", "call mom", "x" * 200])
def test_words_that_mean_no_time_say_what_to_write(words):
    with pytest.raises(RecurrenceError, match="tomorrow at 9am, in 20 minutes"):
        parse_when(words, PARIS, WEDNESDAY_EVENING)


class _State(TypedDict, total=False):
    result: str


def _clock_at(monkeypatch, instant: dict[str, datetime]) -> None:
    """The executor's clock, moved by the test (the question's moment is taken from it)."""
    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return instant["now"].astimezone(tz) if tz else instant["now"]

    monkeypatch.setattr(executor_module, "datetime", Clock)


def test_an_approval_given_an_hour_late_creates_the_reminder_at_the_time_the_question_showed(tmp_path, monkeypatch):
    """"In 20 minutes", asked at 12:00 and approved at 13:00 (the graph re-runs its node on resume, as the chat,
    jorb and mission graphs do): the reminder is at 12:20, as shown, and the user is not asked again."""
    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}, "timezone": "Europe/Paris",
                                   "autonomy": {"default": "confirm"}}, tmp_path)
    executor = ToolExecutor(settings, ToolCatalog([StaticProvider("reminders", build_reminder_tools(settings))]))
    asked_at = datetime.now(timezone.utc).replace(second=30, microsecond=0)
    instant = {"now": asked_at}
    _clock_at(monkeypatch, instant)
    key = f"t|{uuid.uuid4().hex}"

    def step(state: _State) -> dict[str, Any]:
        outcome = executor.execute("reminder_create", {"title": "call mom", "when": "in 20 minutes"},
                                   CallContext(thread_id="t", key=key), lambda request: interrupt(request.payload()))
        return {"result": outcome.content}

    builder = StateGraph(_State)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}

    graph.invoke({}, config)
    (shown,) = [i.value for i in graph.get_state(config).interrupts]
    meant = (asked_at + timedelta(minutes=20)).astimezone(PARIS)
    assert shown["args"]["when"] == meant.isoformat(timespec="minutes")
    assert meant.strftime("%H:%M") in shown["summary"]

    instant["now"] = asked_at + timedelta(hours=1)  # the user answers an hour later
    result = graph.invoke(Command(resume="approve"), config)
    assert not graph.get_state(config).interrupts, "asked again: the time shown was not the time fixed"
    assert "Created reminder" in result["result"]
    (made,) = ReminderStore(settings).list()
    assert made.due_date == (asked_at + timedelta(minutes=20)).replace(second=0)
