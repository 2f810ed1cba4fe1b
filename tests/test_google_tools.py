"""Gmail and Calendar tools against a local server speaking Google's REST protocol (tests/fakes/google_server.py):
real AuthorizedSession, real token refresh over HTTP, pagination, injected 401 / 429 / 5xx."""

from __future__ import annotations

import base64
import email
from datetime import datetime, timedelta, timezone

import pytest

from integrations.base import ToolError, is_untrusted, tool_meta
from integrations.gcal_tools import build_gcal_tools
from integrations.gmail_tools import build_gmail_tools
from integrations.google_api import NOT_CONFIGURED, GoogleApi

UTC = timezone.utc


class Keeper:
    """Where the tests keep credentials (the orchestrator uses the keyring; see test_google_auth.py)."""

    def __init__(self, info: dict | None):
        from google.oauth2.credentials import Credentials

        # from_authorized_user_info always sets Google's token endpoint; point it at the fake, as
        # google.token_uri does in the config
        self.creds = Credentials.from_authorized_user_info(info).with_token_uri(info["token_uri"]) if info else None
        self.saved: list[str] = []

    def load(self):
        return self.creds

    def save(self, creds) -> None:
        self.saved.append(creds.token)


@pytest.fixture
def keeper(google_server):
    return Keeper(google_server.authorized_user_info())


def api(server, keeper, **kw) -> GoogleApi:
    return GoogleApi(server.url, keeper.load, keeper.save, service="Gmail", backoff_s=0.01, **kw)


@pytest.fixture
def gmail(google_server, keeper):
    return {t.name: t for t in build_gmail_tools(api(google_server, keeper))}


@pytest.fixture
def gcal(google_server, keeper):
    return {t.name: t for t in build_gcal_tools(api(google_server, keeper), "primary", "Europe/Paris")}


def _alice_thread(server) -> str:
    first = server.add_message(sender="Alice Martin <alice@example.com>", subject="Q3 report",
                               body="Hi, can you review the Q3 report by Friday? Alice",
                               date=datetime(2025, 3, 3, 9, 0, tzinfo=UTC), message_id="<q3-1@example.com>")
    server.add_message(sender="Alice Martin <alice@example.com>", subject="Re: Q3 report", thread_id=first["threadId"],
                       body="<p>Also, the <b>budget</b> table is on page 4.</p><script>x()</script>", html=True,
                       date=datetime(2025, 3, 3, 10, 0, tzinfo=UTC), message_id="<q3-2@example.com>")
    return first["threadId"]


def test_not_configured_says_how_to_connect(google_server):
    tools = {t.name: t for t in build_gmail_tools(GoogleApi(google_server.url, lambda: None))}
    with pytest.raises(ToolError) as info:
        tools["gmail_search"].func("from:alice")
    assert str(info.value) == NOT_CONFIGURED and "`jarvis auth google`" in NOT_CONFIGURED
    assert google_server.requests == []


def test_search_follows_pages_and_stops_at_max_results(gmail, google_server):
    for i in range(5):
        google_server.add_message(sender="Alice <alice@example.com>", subject=f"note {i}", body=f"body {i}",
                                  date=datetime(2025, 1, 1, 9, i, tzinfo=UTC))
    google_server.add_message(sender="Bob <bob@example.com>", subject="other", body="nothing")
    found = gmail["gmail_search"].invoke({"query": "from:alice"})
    assert [m["subject"] for m in found] == [f"note {i}" for i in (4, 3, 2, 1, 0)]
    assert found[0]["from"] == "Alice <alice@example.com>" and found[0]["unread"] is True
    lists = [r for r in google_server.requests if r[1] == "/gmail/v1/users/me/messages"]
    assert [r[2].get("pageToken") for r in lists] == [None, "2", "4"]
    assert [m["subject"] for m in gmail["gmail_search"].invoke({"query": "from:alice", "max_results": 3})] == \
        ["note 4", "note 3", "note 2"]


def test_thread_bodies_plain_and_html(gmail, google_server):
    thread_id = _alice_thread(google_server)
    thread = gmail["gmail_get_thread"].invoke({"thread_id": thread_id})
    assert thread["subject"] == "Q3 report" and len(thread["messages"]) == 2
    assert "review the Q3 report by Friday" in thread["messages"][0]["body"]
    assert thread["messages"][1]["body"] == "Also, the budget table is on page 4."
    with pytest.raises(ToolError, match="was not found"):
        gmail["gmail_get_thread"].func("t9999")


def test_draft_reply_then_send(gmail, google_server):
    thread_id = _alice_thread(google_server)
    draft = gmail["gmail_draft_reply"].invoke({"thread_id": thread_id, "body_md": "Sure, **Friday** works.\n\n- item"})
    assert draft["to"] == "Alice Martin <alice@example.com>" and draft["subject"] == "Re: Q3 report"
    assert google_server.sent == []  # a draft is not an email
    raw = google_server.drafts[draft["draft_id"]]["message"]["raw"]
    mail = email.message_from_bytes(base64.urlsafe_b64decode(raw + "=="))
    assert mail["In-Reply-To"] == "<q3-2@example.com>" and mail["References"] == "<q3-2@example.com>"
    assert mail["From"] == "me@example.com"
    parts = {p.get_content_type(): p.get_payload(decode=True).decode() for p in mail.walk() if not p.is_multipart()}
    assert "Sure, **Friday** works." in parts["text/plain"] and "<strong>Friday</strong>" in parts["text/html"]
    send = gmail["gmail_send_draft"]
    summary = tool_meta(send).summarize({"draft_id": draft["draft_id"]})
    assert summary == (f"Send the email to alice@example.com (draft {draft['draft_id']}): subject 'Re: Q3 report', "
                       "beginning 'Sure, **Friday** works. - item'.")
    out = send.invoke({"draft_id": draft["draft_id"]})
    assert out["sent"] is True and google_server.sent[0]["to"] == ["alice@example.com"]
    assert tool_meta(send).side_effects == ("email_send",)
    assert tool_meta(gmail["gmail_draft_reply"]).side_effects == ("email_draft",)
    assert tool_meta(gmail["gmail_get_thread"]).untrusted_output is True
    # the draft's answer quotes the thread's Subject and Reply-To, which the email's sender wrote: outside content
    assert is_untrusted(gmail["gmail_draft_reply"]) and draft["subject"] == "Re: Q3 report"


INJECTED = "=?utf-8?q?Q3=0ABcc:_eve@evil.example=0AX-Pad:?="  # an encoded word holding line breaks


def test_a_reply_copies_no_header_line_the_sender_hid_in_an_encoded_word(gmail, google_server):
    """The reply copied the Subject and Message-ID of the message it answers, which the sender wrote. Python 3.11.7
    writes an encoded word holding a line break back out raw (CVE-2024-6923): the draft got a `Bcc:
    eve@evil.example` header, and sending it (the question names only the To) mailed her a copy. Now the subject
    is plain text and the threading headers keep only their <id@host> tokens."""
    first = google_server.add_message(sender="Boss <boss@company.example>", subject=INJECTED, body="numbers?",
                                      message_id=f"<q3@company.example> {INJECTED}")
    draft = gmail["gmail_draft_reply"].invoke({"thread_id": first["threadId"], "body_md": "Here they are."})
    raw = google_server.drafts[draft["draft_id"]]["message"]["raw"]
    mail = email.message_from_bytes(base64.urlsafe_b64decode(raw + "=="))
    assert mail.get_all("Bcc") is None and mail.get_all("X-Pad") is None, mail.items()
    assert mail["Subject"] == "Re: Q3 Bcc: eve@evil.example X-Pad:"  # the sender's words, on one line
    assert mail["In-Reply-To"] == "<q3@company.example>" and mail["References"] == "<q3@company.example>"
    gmail["gmail_send_draft"].invoke({"draft_id": draft["draft_id"]})
    assert google_server.sent[-1]["to"] == ["boss@company.example"]


def test_the_send_question_names_every_recipient_first_and_says_when_it_cannot(gmail, google_server, keeper):
    """The question named only the draft's To (Gmail sends it to Cc and Bcc as well), after a subject the thread's
    sender wrote, which could push the real recipient out of sight; a draft that could not be read was asked
    about as its id alone."""
    raw = base64.urlsafe_b64encode(
        b"To: bob@company.example\r\nCc: carol@company.example\r\nBcc: eve@evil.example\r\n"
        b'Subject: Lunch" to boss@company.example (draft r7).' + b" " * 300 + b"\r\n\r\nSee you at noon.\r\n").decode()
    did = api(google_server, keeper).request("POST", "/gmail/v1/users/me/drafts", json={"message": {"raw": raw}})["id"]
    describe = tool_meta(gmail["gmail_send_draft"]).summarize
    asked = describe({"draft_id": did})
    assert asked.startswith("Send the email to bob@company.example; cc carol@company.example; bcc eve@evil.example"), asked
    assert "See you at noon." in asked and len(asked) < 400
    unreadable = describe({"draft_id": "r-gone"})
    assert "could not be read" in unreadable and "approve only if you know" in unreadable


def test_a_message_that_came_out_with_other_headers_is_not_sent():
    """The last check of what is sent: the bytes parsed back hold the headers written, to the recipients shown."""
    from email.message import EmailMessage

    from integrations.mail_headers import UnsafeMessage, checked_bytes

    mail = EmailMessage()
    mail["To"] = "hotel@x.example"
    mail["Subject"] = INJECTED  # written as given: what this Python does with it is what is checked
    mail.set_content("card 4111")
    with pytest.raises(UnsafeMessage, match="Nothing was sent"):
        checked_bytes(mail, ["hotel@x.example"])
    with pytest.raises(UnsafeMessage):
        checked_bytes(mail, ["someone@else.example"])
    plain = EmailMessage()
    plain["To"] = "hotel@x.example"
    plain["Subject"] = "Booking"
    plain.set_content("ok")
    assert checked_bytes(plain, ["Hotel@X.example"]).startswith(b"To: hotel@x.example")


def test_401_refreshes_the_token_and_hands_it_back(gmail, google_server, keeper):
    google_server.add_message(sender="alice@example.com", subject="hello", body="hi")
    google_server.expire_tokens()
    assert gmail["gmail_search"].invoke({"query": "hello"})[0]["subject"] == "hello"
    assert google_server.state.refreshes == 1
    assert keeper.saved and keeper.saved[-1] == keeper.creds.token
    statuses = [r for r in google_server.requests if r[1] == "/token"]
    assert len(statuses) == 1


def test_revoked_access_says_to_sign_in_again(gmail, google_server):
    google_server.revoke()
    with pytest.raises(ToolError) as info:
        gmail["gmail_search"].func("x")
    assert "run `jarvis auth google` again" in str(info.value)


def test_429_then_success_with_backoff(gmail, google_server):
    google_server.add_message(sender="alice@example.com", subject="hello", body="hi")
    google_server.fail("GET", r"/messages$", 429, times=2, retry_after=0)
    assert gmail["gmail_search"].invoke({"query": "hello"})[0]["subject"] == "hello"
    assert len([r for r in google_server.requests if r[1].endswith("/messages")]) == 3


def test_persistent_429_gives_up_in_one_sentence(google_server, keeper):
    tools = {t.name: t for t in build_gmail_tools(api(google_server, keeper, max_retries=2))}
    google_server.fail("GET", r"/messages$", 429, times=10)
    with pytest.raises(ToolError, match=r"rate-limiting Jarvis \(HTTP 429, still after 2 retries\)"):
        tools["gmail_search"].func("x")
    assert len([r for r in google_server.requests if r[1].endswith("/messages")]) == 3


def test_5xx_is_retried_for_reads_but_never_for_sending(gmail, google_server):
    thread_id = _alice_thread(google_server)
    google_server.fail("GET", r"/threads/", 503, times=1)
    assert gmail["gmail_get_thread"].invoke({"thread_id": thread_id})["subject"] == "Q3 report"
    draft = gmail["gmail_draft_reply"].invoke({"thread_id": thread_id, "body_md": "ok"})
    google_server.fail("POST", r"/drafts/send$", 503, times=1)
    with pytest.raises(ToolError, match="HTTP 503"):
        gmail["gmail_send_draft"].func(draft["draft_id"])
    assert len([r for r in google_server.requests if r[1].endswith("/drafts/send")]) == 1
    assert google_server.sent == []


# -- Calendar ----------------------------------------------------------------------------------------
def test_list_events_in_a_window_across_pages(gcal, google_server):
    for day in range(1, 6):
        google_server.add_event("primary", f"standup {day}", f"2025-03-0{day}T09:00:00+00:00", f"2025-03-0{day}T09:15:00+00:00")
    events = gcal["gcal_list_events"].invoke({"time_min": "2025-03-02T00:00", "time_max": "2025-03-05T00:00"})
    assert [e["summary"] for e in events] == ["standup 2", "standup 3", "standup 4"]
    lists = [r for r in google_server.requests if r[1].endswith("/events")]
    assert len(lists) == 2 and lists[0][2]["timeMin"] == "2025-03-02T00:00:00+01:00"  # Europe/Paris
    with pytest.raises(ToolError, match="must be after"):
        gcal["gcal_list_events"].func("2025-03-05", "2025-03-01")
    with pytest.raises(ToolError, match="is not a date/time"):
        gcal["gcal_list_events"].func("next tuesday", "2025-03-01")


def test_free_slots_avoid_busy_times_within_working_hours(gcal, google_server):
    # Paris is UTC+1 in March: 09:00-18:00 local is 08:00-17:00 UTC
    google_server.add_event("primary", "busy", "2025-03-03T08:00:00Z", "2025-03-03T09:30:00Z")  # 09:00-10:30
    google_server.add_event("primary", "lunch", "2025-03-03T11:00:00Z", "2025-03-03T12:00:00Z")  # 12:00-13:00
    out = gcal["gcal_free_slots"].invoke({"duration_minutes": 60, "time_min": "2025-03-03T00:00",
                                          "time_max": "2025-03-04T00:00"})
    starts = [s["start"] for s in out["slots"]]
    assert starts == ["2025-03-03T10:30:00+01:00", "2025-03-03T13:00:00+01:00"]
    assert out["slots"][1]["free_until"] == "2025-03-03T18:00:00+01:00"
    none = gcal["gcal_free_slots"].invoke({"duration_minutes": 600, "time_min": "2025-03-03T00:00",
                                           "time_max": "2025-03-04T00:00"})
    assert none["slots"] == [] and "no free slot" in none["note"]


def test_create_event_with_reminder_and_summary(gcal, google_server):
    create = gcal["gcal_create_event"]
    args = {"summary": "Read the report", "start": "2025-03-04T09:00", "reminder_minutes": 0}
    assert tool_meta(create).summarize(args) == ("Create the Google Calendar event \"Read the report\" "
                                                  "Tue 2025-03-04 09:00 (UTC+0100) to 09:30, with a reminder 0 min before.")
    out = create.invoke(args)
    assert out["status"] == "created" and out["start"] == "2025-03-04T09:00:00+01:00"
    stored = google_server.events("primary")[0]
    assert stored["reminders"] == {"useDefault": False, "overrides": [{"method": "popup", "minutes": 0}]}
    assert stored["start"]["timeZone"] == "Europe/Paris" and stored["end"]["dateTime"] == "2025-03-04T09:30:00+01:00"
    with pytest.raises(ToolError, match="not an email address"):
        create.func("x", "2025-03-04T09:00", attendees=["bob"])


def test_a_lost_answer_does_not_create_the_event_twice(gcal, google_server):
    google_server.fail("POST", r"/events$", 502, times=1, after=True)  # created, but the answer is lost
    out = gcal["gcal_create_event"].invoke({"summary": "Dentist", "start": "2025-03-05T15:00", "duration_minutes": 45})
    assert out["summary"] == "Dentist" and out["end"] == "2025-03-05T15:45:00+01:00"
    assert len(google_server.events("primary")) == 1
    assert len([r for r in google_server.requests if r[0] == "POST" and r[1].endswith("/events")]) == 2


def test_all_day_event(gcal, google_server):
    out = gcal["gcal_create_event"].invoke({"summary": "Holiday", "start": "2025-03-10"})
    assert out["start"] == "2025-03-10" and out["end"] == "2025-03-11"


def test_now_relative_window_uses_the_user_zone(gcal, google_server):
    now = datetime.now(UTC)
    google_server.add_event("primary", "soon", (now + timedelta(hours=1)).isoformat(), (now + timedelta(hours=2)).isoformat())
    events = gcal["gcal_list_events"].invoke({"time_min": now.isoformat(), "time_max": (now + timedelta(days=1)).isoformat()})
    assert [e["summary"] for e in events] == ["soon"]


def test_an_event_with_attendees_is_judged_as_the_emails_it_sends(gcal):
    """With attendees, the event is created with sendUpdates=all: Google emails each one an invitation carrying the
    title and the description. Judged as calendar_write only, it went out without asking wherever the calendar is
    automatic; a model steered by a mail could invite eve@ to an event whose description holds the user's data."""
    from integrations.base import side_effects_of

    create = gcal["gcal_create_event"]
    invite = {"summary": "Sync", "start": "2025-03-04T09:00", "attendees": ["eve@evil.example"],
              "description": "the passwords"}
    assert side_effects_of(create, invite) == ["calendar_write", "email_send"]
    assert side_effects_of(create, {**invite, "attendees": []}) == ["calendar_write"]
    assert side_effects_of(create, {**invite, "attendees": [" "]}) == ["calendar_write"]


def test_an_invitation_asks_even_where_the_calendar_is_automatic(tmp_path, gcal):
    from orchestrator.core.config import settings_from_dict
    from orchestrator.tools.catalog import StaticProvider, ToolCatalog
    from orchestrator.tools.executor import CallContext, ToolExecutor

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")},
                                   "autonomy": {"effects": {"calendar_write": "auto"}}}, tmp_path)
    executor = ToolExecutor(settings, ToolCatalog([StaticProvider("google", [gcal["gcal_create_event"]])]))
    asked = []

    def deny(request):
        asked.append(request)
        return {"decision": "deny", "reason": "test"}

    invite = {"summary": "Sync", "start": "2025-03-04T09:00", "attendees": ["eve@evil.example"]}
    outcome = executor.execute("gcal_create_event", invite, CallContext(thread_id="t", key="k-invite"), deny)
    assert len(asked) == 1 and "email_send" in asked[0].side_effects and not outcome.ok
    alone = executor.execute("gcal_create_event", {"summary": "Focus", "start": "2025-03-04T09:00"},
                             CallContext(thread_id="t", key="k-alone"), lambda r: pytest.fail("asked"))
    assert alone.ok, alone.content
