"""The two everyday flows of seed 002 section 11.1, end to end through the graph: the scripted model over HTTP,
the real tools, the fake Google server, confirmations through interrupts."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from langgraph.types import Command

from tests.conftest import answer, tool_call
from tests.fakes.llm_server import last_message_text, tool_results

ZONE = "Europe/Paris"


@pytest.fixture
def google_env(jarvis_env, google_server):
    from google.oauth2.credentials import Credentials

    from orchestrator.tools import google_auth

    jarvis_env.write_config(**_google_config(google_server))
    google_auth.save_credentials(jarvis_env.settings,
                                 Credentials.from_authorized_user_info(google_server.authorized_user_info()))
    return jarvis_env


def _google_config(google_server, **overrides):
    return {"google": {"gmail_base_url": google_server.url, "calendar_base_url": google_server.url,
                       "token_uri": google_server.token_uri, "backoff_s": 0.01}, "timezone": ZONE, **overrides}


def _run(graph, thread: str, value):
    return graph.invoke(value, {"configurable": {"thread_id": thread}}, version="v2")


def test_summarize_a_pdf_and_remind_me_tomorrow_at_9(google_env, google_server, sample_pdfs):
    env, server = google_env, google_env.server
    pdf = env.root / "report.pdf"
    shutil.copy(sample_pdfs.one, pdf)
    nine = (datetime.now(ZoneInfo(ZONE)) + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
    server.add_rule(lambda r: last_message_text(r).startswith("Write the key points") and "of the PDF report.pdf" in
                    last_message_text(r), {"content": "- Meeting with Bob on Tuesday at 10:00 in room 4 (p. 1)"})
    server.push(
        tool_call("pdf_summarize", path=str(pdf), style="key_points"),
        tool_call("gcal_create_event", summary="Reminder: report.pdf", start=nine.strftime("%Y-%m-%dT%H:%M"),
                  duration_minutes=15, reminder_minutes=0, description="Meeting with Bob on Tuesday at 10:00"),
        answer("Summary: Bob meets you on Tuesday at 10:00 in room 4 (p. 1). The reminder is set for tomorrow 09:00."),
    )
    graph = env.graph()
    result = _run(graph, "pdf-flow", {"messages": [("user", f"Summarize {pdf} and remind me tomorrow at 9am")]})

    # the summary ran (its own model call saw the page), the event waits for the user
    summarizer = [r for r in server.requests if last_message_text(r).startswith("Write the key points")]
    assert len(summarizer) == 1 and "The meeting with Bob is on Tuesday" in last_message_text(summarizer[0])
    assert len(result.interrupts) == 1
    ask = result.interrupts[0].value
    assert ask["tool"] == "gcal_create_event" and "calendar_write" in ask["side_effects"]
    assert ask["summary"].startswith('Create the Google Calendar event "Reminder: report.pdf" ')
    assert nine.strftime("%Y-%m-%d 09:00") in ask["summary"] and "reminder 0 min before" in ask["summary"]
    assert google_server.events("primary") == []  # nothing before the approval

    result = _run(graph, "pdf-flow", Command(resume={result.interrupts[0].id: {"decision": "approve"}}))
    assert not result.interrupts
    events = google_server.events("primary")
    assert len(events) == 1 and events[0]["start"]["dateTime"] == nine.isoformat(timespec="seconds")
    assert events[0]["reminders"]["overrides"] == [{"method": "popup", "minutes": 0}]
    messages = result.value["messages"]
    assert messages[-1].content.startswith("Summary: Bob meets you")
    tools_seen = [m for m in messages if m.type == "tool"]
    assert "Summary of report.pdf (1 page):" in tools_seen[0].content and "Meeting with Bob" in tools_seen[0].content
    assert json.loads(tools_seen[1].content)["status"] == "created"


def _alice(server) -> str:
    first = server.add_message(sender="Alice Martin <alice@example.com>", subject="Q3 report",
                               body="Hi! Could you review the Q3 report by Friday? The budget table needs a second look.",
                               message_id="<q3@example.com>")
    server.add_message(sender="Carol <carol@example.com>", subject="Lunch", body="Lunch on Thursday?")
    return first["threadId"]


def _draft_id_from_results(request) -> dict:
    for msg in reversed(tool_results(request)):
        m = re.search(r'"draft_id": "([^"]+)"', msg.get("content") or "")
        if m:
            return tool_call("gmail_send_draft", draft_id=m.group(1))
    return answer("I could not find the draft.")


@pytest.mark.parametrize("send_decision", ["approve", "deny"])
def test_summarize_alices_thread_draft_a_reply_and_send_only_after_confirmation(google_env, google_server, send_decision):
    env, server = google_env, google_env.server
    # The policy lets drafts run by themselves, so the only reason to ask is the email the turn has read.
    env.write_config(**_google_config(google_server, autonomy={"effects": {"email_draft": "auto"}}))
    thread_id = _alice(google_server)
    server.push(
        tool_call("gmail_search", query="from:alice", max_results=5),
        tool_call("gmail_get_thread", thread_id=thread_id),
        tool_call("gmail_draft_reply", thread_id=thread_id, body_md="Hi Alice,\n\nYes, I will review it by **Friday**."),
        answer("Alice asks for a review of the Q3 report by Friday. I drafted a reply; shall I send it?"),
    )
    graph = env.graph()
    result = _run(graph, "mail-flow", {"messages": [("user", "summarize the thread from Alice and draft a reply")]})
    # drafting asks too: the turn has read an email, which must never make Jarvis act by itself
    assert len(result.interrupts) == 1 and result.interrupts[0].value["tool"] == "gmail_draft_reply"
    assert result.interrupts[0].value["escalated"] is True
    assert "outside the conversation" in result.interrupts[0].value["reason"]
    result = _run(graph, "mail-flow", Command(resume={result.interrupts[0].id: {"decision": "approve"}}))
    assert not result.interrupts and len(google_server.drafts) == 1 and google_server.sent == []
    assert "shall I send it?" in result.value["messages"][-1].content
    # the model saw the thread's body (as untrusted tool output)
    thread_msg = [m for m in result.value["messages"] if m.type == "tool" and m.name == "gmail_get_thread"][0]
    assert "review the Q3 report by Friday" in thread_msg.content

    server.add_rule(lambda r: last_message_text(r) == "yes, send it", _draft_id_from_results, times=1)
    server.push(answer("Sent." if send_decision == "approve" else "OK, I did not send it."))
    result = _run(graph, "mail-flow", {"messages": [("user", "yes, send it")]})
    assert len(result.interrupts) == 1
    ask = result.interrupts[0].value
    assert ask["tool"] == "gmail_send_draft" and ask["side_effects"] == ["email_send"]
    draft_id = next(iter(google_server.drafts))
    assert ask["summary"] == (f"Send the email to alice@example.com (draft {draft_id}): subject 'Re: Q3 report', "
                              "beginning 'Hi Alice, Yes, I will review it by **Friday**.'.")
    assert google_server.sent == []  # not before the answer

    result = _run(graph, "mail-flow", Command(resume={result.interrupts[0].id: {"decision": send_decision}}))
    assert not result.interrupts
    if send_decision == "approve":
        assert len(google_server.sent) == 1 and google_server.sent[0]["to"] == ["alice@example.com"]
        assert result.value["messages"][-1].content == "Sent."
    else:
        assert google_server.sent == [] and draft_id in google_server.drafts
        denied = [m for m in result.value["messages"] if m.type == "tool" and m.name == "gmail_send_draft"][-1]
        assert "denied" in denied.content


@pytest.mark.parametrize("yes", ["approve", "edit"])  # an edit saved unchanged is the same yes
def test_a_draft_changed_after_the_question_is_not_sent_on_the_yes_to_what_it_was(google_env, google_server, yes):
    """The question names the draft's recipients and text, read from Gmail when it is asked; the approval was bound
    to the draft's id only, so a draft changed meanwhile (another client, a shared mailbox) was sent as changed,
    to someone the user never saw. Now the yes holds only while the call reads as it did; else it asks again."""
    env, server = google_env, google_env.server
    env.write_config(**_google_config(google_server))
    thread_id = _alice(google_server)
    server.push(tool_call("gmail_draft_reply", thread_id=thread_id, body_md="Hi Alice, yes."), answer("Drafted."))
    graph = env.graph()
    result = _run(graph, "swap", {"messages": [("user", "draft a reply to Alice saying yes")]})
    result = _run(graph, "swap", Command(resume={result.interrupts[0].id: {"decision": "approve"}}))
    draft_id = next(iter(google_server.drafts))
    server.push(tool_call("gmail_send_draft", draft_id=draft_id), answer("Sent."))
    result = _run(graph, "swap", {"messages": [("user", "send it")]})
    (ask,) = result.interrupts
    assert "to alice@example.com" in ask.value["summary"]
    headers = google_server.drafts[draft_id]["message"]["payload"]["headers"]  # changed in Gmail meanwhile
    for h in headers:
        if h["name"] == "To":
            h["value"] = "eve@evil.example"

    answer_given = {"decision": yes, **({"args": {"draft_id": draft_id}} if yes == "edit" else {})}
    result = _run(graph, "swap", Command(resume={ask.id: answer_given}))
    (again,) = result.interrupts
    assert google_server.sent == []  # the yes was for Alice
    assert "to eve@evil.example" in again.value["summary"] and "changed since you were asked" in again.value["error"]
    assert "alice@example.com" in again.value["error"]
    result = _run(graph, "swap", Command(resume={again.id: {"decision": "approve"}}))  # seen, and approved
    assert not result.interrupts and [m["to"] for m in google_server.sent] == [["eve@evil.example"]]


def test_long_summary_reports_progress_to_the_turn(jarvis_env, sample_pdfs):
    from orchestrator.chat.turns import stream_turn, user_input

    pdf = jarvis_env.root / "long.pdf"
    shutil.copy(sample_pdfs.fifty, pdf)
    server = jarvis_env.server
    server.add_rule(lambda r: not r.get("tools"), lambda r: {"content": "notes (p. 1)", "delay_s": 0.05})
    server.push(tool_call("pdf_summarize", path=str(pdf)), answer("Done."))
    jarvis_env.write_config(pdf={"chunk_tokens": 600})
    events = list(stream_turn(jarvis_env.graph(), "progress", user_input(f"summarize {pdf}")))
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and all(e["tool"] == "pdf_summarize" and e["total"] == 50 for e in progress)
    assert progress[-1]["message"].startswith("pdf_summarize: ") and "/50 pages" in progress[-1]["message"]
    assert events[-1] == {"event": "done", "content": "Done.", "message_id": events[-1]["message_id"]}
