"""The system prompt stays the same from turn to turn of a thread whatever is remembered or attached ([21] x [25]):
the memory block and the attachments follow the user's latest message (chat/turn_context.py), so a server's
prefix cache keeps the system text, the tools and the earlier turns."""

from __future__ import annotations

from orchestrator.llm.context_block import CONTEXT_MARKER
from orchestrator.memory import Provenance, SourceKind
from tests.conftest import answer


def test_the_system_prompt_is_the_same_every_turn_whatever_is_remembered_or_attached(jarvis_env):
    jarvis_env.write_config(models={"primary": {"context_tokens": 65536}})  # every tool bound (tool_binding.py)
    app = jarvis_env.app()
    # No digits in the fact: the second message names the file by its path, and a path under pytest's numbered
    # folder matched "12 Harbour Street" by keyword whenever that folder was pytest-12 (/tmp/pytest-of-root/...).
    app.memory.remember("Dr Lee's practice is on Harbour Street", Provenance(SourceKind.USER, True, "thread A"),
                        about="Dr Lee", kind="person")
    notes = jarvis_env.root / "notes.txt"
    notes.write_text("buy bread\n")
    srv = jarvis_env.server
    texts = ["call Dr Lee", f"what is in {notes}?", "thanks"]
    for text in texts:
        srv.push(answer("ok"))
        app.graph.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": "prefix"}})
    first, second, third = srv.requests[-3:]
    assert first["messages"][0] == second["messages"][0] == third["messages"][0]  # the system text
    assert first["tools"] == second["tools"] == third["tools"]
    assert "Harbour Street" in first["messages"][1]["content"].split(CONTEXT_MARKER, 1)[1]
    assert "Harbour Street" not in second["messages"][-1]["content"]  # chosen for each message
    assert f"text: {notes}" in second["messages"][-1]["content"].split(CONTEXT_MARKER, 1)[1]
    assert f"text: {notes}" in third["messages"][-1]["content"]  # attachments stay with the thread
    # The thread keeps the messages as typed: a turn's prompt starts with the previous one up to its last message.
    assert [m["content"] for m in second["messages"][1:3]] == ["call Dr Lee", "ok"]
    assert third["messages"][:4] == [second["messages"][0], *second["messages"][1:3],
                                     {**second["messages"][3], "content": texts[1]}]


def test_the_system_prompt_says_the_hour_of_the_zone_in_use(jarvis_env, monkeypatch):
    """The system text is made once per hour (planner._system_text): when the machine's zone changes, the hour and
    the zone's name change with it, although the same instant in both zones was one hour."""
    import time
    from datetime import datetime, timezone

    from langchain_core.messages import HumanMessage

    from orchestrator.chat import planner
    from orchestrator.chat.state import ConversationState

    state = ConversationState(messages=[HumanMessage(content="hi")])
    seen = []
    for zone in ("UTC", "Asia/Tokyo", "UTC"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        now = datetime.now(timezone.utc).astimezone()
        text = planner.system_prompt(jarvis_env.settings, state)
        assert f"between {now.strftime('%H')}:00 and {now.strftime('%H')}:59 ({now.tzname()})" in text, text
        seen.append(now.tzname())
    monkeypatch.delenv("TZ")
    time.tzset()
    assert seen == ["UTC", "JST", "UTC"]
