"""Property-based fuzz (Hypothesis) of what reaches Jarvis from outside: the web API's bodies, Telegram updates,
Gmail messages of a jorb's thread, MCP results, the model's answers (tool calls of every shape) and an agent
program's JSON-RPC lines. The property everywhere: a clear refusal or a result, never a 500, an unhandled exception
or a hang. Each test is bounded (a per-example deadline, few examples) and reproducible (derandomized, no example
database), so the file runs in `make test` in well under a minute."""

from __future__ import annotations

import base64
import json
import string
import subprocess
import sys
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import answer

BOUNDED = settings(max_examples=25, deadline=timedelta(seconds=10), derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FEW = settings(BOUNDED, max_examples=6, deadline=timedelta(seconds=30))

scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=16)


def shaped(keys: list[str], plausible: list) -> st.SearchStrategy[dict]:
    """Objects with the surface's own keys (and strangers), each holding a plausible value or any JSON."""
    value = st.sampled_from(plausible) | json_values
    return st.dictionaries(st.sampled_from([*keys, "x", ""]), value, max_size=len(keys) + 1)


# -- the web API --------------------------------------------------------------------------------------------------
DATES = ["2030-01-01T09:00", "tomorrow", "2030-02-30", "9999-12-31T23:59:59+14:00", "", " ", "P1D", "-1"]
ENDPOINTS = [
    ("/api/reminders", shaped(["title", "when", "rrule", "target_kind", "target", "description", "priority",
                               "missed_policy"],
                              [*DATES, "FREQ=SECONDLY", "FREQ=DAILY;COUNT=0", "chat", "agent", "webhook", "jorb",
                               "http://127.0.0.1:1/x", "low", "skip", "ask", "a" * 600])),
    ("/api/facts", shaped(["fact", "about", "kind", "expires"], [*DATES, "person", "never", "a" * 1200])),
    ("/api/inbound", shaped(["channel", "sender", "text", "jorb_id", "thread_key", "external_id"],
                            ["local", "email", "telegram", "@x", "", "nope", "a" * 300])),
    ("/api/jorbs/nope/decide", shaped(["interrupt_id", "ref", "action", "note"], ["approve", "reject", ""])),
    ("/api/jorbs/nope/step", shaped(["interrupt_id", "step"], ["{}", '{"done": true}', ""])),
    ("/api/jorbs/nope/reply", shaped(["text", "as_user", "party", "channel"], ["hi", "local", "@x", ""])),
    ("/api/memory/proposals/1/accept", json_values),
]


@pytest.fixture
def ui(jarvis_env):
    from tests.ui_server import start_ui

    with start_ui(jarvis_env) as server, server.client() as client:
        yield server, client


@BOUNDED
@given(case=st.sampled_from(range(len(ENDPOINTS))).flatmap(
    lambda i: st.tuples(st.just(ENDPOINTS[i][0]), ENDPOINTS[i][1] | json_values)))
def test_api_bodies_are_answered_or_refused_never_a_500(ui, case):
    _, client = ui
    path, body = case
    resp = client.post(path, json=body)
    assert resp.status_code < 500, (path, body, resp.status_code, resp.text[:500])
    if resp.status_code >= 400:
        assert resp.json().get("detail"), resp.text[:500]  # a refusal says why


@BOUNDED
@given(raw=st.binary(max_size=300), name=st.text(max_size=80), path=st.sampled_from([p for p, _ in ENDPOINTS]))
def test_api_raw_bodies_and_upload_names_are_refused_clearly(ui, raw, name, path):
    _, client = ui
    resp = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert resp.status_code < 500 and resp.status_code != 200, (path, raw, resp.text[:300])
    up = client.post("/api/uploads", params={"filename": name}, content=raw)
    assert up.status_code < 500, (name, up.text[:300])


# -- Telegram updates ---------------------------------------------------------------------------------------------
users = shaped(["id", "username", "is_bot", "first_name"], [42, 66, "alice", "mallory", "", -1])
chats = shaped(["id", "type"], [42, -100, "private", "group", "supergroup"])
messages = st.fixed_dictionaries({}, optional={
    "message_id": st.integers(0, 10**6) | json_values, "from": users | json_values, "chat": chats | json_values,
    "text": st.text(max_size=200) | json_values, "date": st.integers(0, 2**31)})
queries = st.fixed_dictionaries({}, optional={
    "id": st.text(max_size=10) | json_values, "from": users | json_values, "data": st.text(max_size=70) | json_values,
    "message": messages | json_values})
# Telegram sends only the kinds asked for (allowed_updates): each update holds a message or a button press
updates = (st.fixed_dictionaries({"message": messages | json_values})
           | st.fixed_dictionaries({"callback_query": queries | json_values}))


@pytest.fixture
def telegram_poller(jarvis_env, monkeypatch):
    from orchestrator.channels.telegram import TelegramPoller
    from tests.fakes.telegram_server import TelegramServer

    with TelegramServer(token="123:TEST") as fake:
        monkeypatch.setenv("JARVIS_SECRET_TELEGRAM_TOKEN", "123:TEST")
        jarvis_env.write_config(channels={"telegram": {"enabled": True, "token": {"secret": "telegram_token"},
                                                       "api_base": fake.base_url, "allowlist": ["@alice"],
                                                       "poll_timeout_s": 0}},
                                confirmations={"notify": {"telegram_user_id": 42}})
        app = jarvis_env.app()
        delivered: list[tuple] = []
        poller = TelegramPoller(jarvis_env.settings, lambda *a: delivered.append(a),
                                on_callback=app.remote_answers.on_callback)
        yield fake, poller, delivered


@BOUNDED
@given(batch=st.lists(updates, min_size=1, max_size=3))
def test_telegram_updates_of_any_shape_never_stop_the_intake(telegram_poller, batch):
    """An update Jarvis cannot read is skipped (the poller's loop logs what poll_once raised and polls again), and
    the offset moves past it: one such update must not hold back the later messages for ever. What is delivered is
    a sender and a text, nothing else."""
    fake, poller, delivered = telegram_poller
    delivered.clear()
    with fake.state.lock:
        poller.state.set("offset", str(fake.state.next_update))  # this example's updates only
        for update in batch:
            fake.state.updates.append({**update, "update_id": fake.state.next_update})
            fake.state.next_update += 1
    for _ in range(len(batch) + 1):  # as TelegramPoller._run does, without its back-off
        try:
            poller.poll_once(timeout=0)
        except Exception:  # noqa: BLE001 - _run logs it and polls again
            continue
    assert int(poller.state.get("offset", "0")) == fake.state.next_update
    for (message,) in delivered:
        channel, party, text = message.channel, message.sender, message.text
        assert channel == "telegram" and isinstance(party, str) and isinstance(text, str) and text


# -- Gmail messages of a jorb's thread ----------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


# Gmail builds these objects (their types are its own); the sender chooses every value: headers, MIME types, file
# names, bodies, nesting
header_names = st.sampled_from(["From", "Authentication-Results", "Subject", "Reply-To", "ARC-Authentication-Results"])
header_values = st.sampled_from(["a <b@c.example>", "=?utf-8?b?AAAA?=", "mx.google.com; dmarc=pass header.from=c",
                                 "mx.google.com; spf=pass smtp.mailfrom=@", '"x@y" <>']) | st.text(max_size=80)
headers = st.lists(st.fixed_dictionaries({"name": header_names | st.text(max_size=10), "value": header_values}),
                   max_size=4)
parts = st.recursive(
    st.fixed_dictionaries({"mimeType": st.sampled_from(["text/plain", "text/html", "application/pdf", "TEXT/HTML", ""])
                           | st.text(max_size=20)}, optional={
        "filename": st.text(max_size=20), "headers": headers,
        "body": st.fixed_dictionaries({}, optional={
            "data": st.binary(max_size=120).map(_b64) | st.text(string.ascii_letters + "-_=", max_size=30)
            | st.sampled_from([_b64(b"<p>a<script>x</script><b>b"), _b64("\u202e\x00\r\n".encode())]),
            "size": st.integers(0, 2**40)})}),
    lambda inner: st.fixed_dictionaries({"mimeType": st.sampled_from(["multipart/alternative", "multipart/mixed"]),
                                         "parts": st.lists(inner, max_size=3)}), max_leaves=8)


@BOUNDED
@given(payload=parts, raw_from=header_values, labels=st.lists(st.sampled_from(["INBOX", "SENT", "DRAFT"])
                                                              | st.text(max_size=8), max_size=3))
def test_mail_of_any_shape_is_read_or_refused_without_an_exception(payload, raw_from, labels):
    from integrations.gmail_tools import message_body
    from orchestrator.channels.addresses import mailbox_of
    from orchestrator.channels.email import sender_verified

    assert isinstance(message_body(payload), str)
    box = mailbox_of(raw_from)
    assert box is None or "@" in box
    msg = {"payload": {**payload, "headers": [{"name": "From", "value": raw_from}, *payload.get("headers", [])]},
           "labelIds": labels}
    assert sender_verified(msg) in (True, False)


@pytest.fixture
def email_poller(jarvis_env, google_server):
    from google.oauth2.credentials import Credentials

    from orchestrator.channels.email import EmailPoller
    from orchestrator.tools import google_auth

    jarvis_env.write_config(google={"gmail_base_url": google_server.url, "calendar_base_url": google_server.url,
                                    "token_uri": google_server.token_uri, "backoff_s": 0.01},
                            channels={"email": {"enabled": True}})
    google_auth.save_credentials(jarvis_env.settings,
                                 Credentials.from_authorized_user_info(google_server.authorized_user_info()))
    threads: list[tuple[str, None]] = []
    delivered: list[tuple] = []
    poller = EmailPoller(jarvis_env.settings, lambda *a: delivered.append(a), lambda: list(threads))
    return google_server, poller, threads, delivered


@BOUNDED
@given(sender=header_values, subject=st.text(max_size=60), body=st.text(max_size=300), html=st.booleans(),
       stamps=st.lists(header_values, max_size=2))
def test_a_reply_of_any_content_in_a_jorbs_email_thread_is_delivered_once(email_poller, sender, subject, body, html,
                                                                           stamps):
    """Through the real poller over Gmail's REST protocol: whatever the sender writes in From, Subject, the body
    and forged Authentication-Results, the message is delivered once, as text, with a sender and a verdict."""
    server, poller, threads, delivered = email_poller
    delivered.clear()
    msg = server.add_message(sender=sender, subject=subject, body=body, html=html, authentication_results=stamps)
    threads[:] = [(msg["threadId"], None)]
    poller.poll_once()
    assert poller.last_error is None, poller.last_error
    assert poller.poll_once() == 0  # once
    for (message,) in delivered:
        channel, party, text = message.channel, message.sender, message.text
        assert channel == "email" and isinstance(party, str) and party and isinstance(text, str)
        assert message.verified in (True, False) and message.thread_key == msg["threadId"]
    assert len(delivered) <= 1


# -- MCP results --------------------------------------------------------------------------------------------------
blocks = shaped(["type", "text", "base64", "url", "mime_type", "data", "mimeType", "resource"],
                ["text", "image", "file", "resource", "audio", "x" * 5000, "aGVsbG8="])


@BOUNDED
@given(content=st.lists(blocks | json_values, max_size=5) | json_values, artifact=json_values
       | st.fixed_dictionaries({"structured_content": json_values}))
def test_mcp_content_of_any_shape_becomes_text(content, artifact):
    from orchestrator.mcp.provider import content_to_text

    assert isinstance(content_to_text(content, artifact), str)


@BOUNDED
@given(raw=st.lists(blocks, max_size=4), structured=st.none() | st.dictionaries(st.text(max_size=8), json_values))
def test_an_mcp_call_result_as_a_server_sends_it_becomes_text_or_is_refused(raw, structured):
    """What an MCP server answers is validated by the SDK's types first: a result they refuse never reaches the
    model; one they accept becomes text."""
    import mcp.types as mt
    from pydantic import ValidationError

    from orchestrator.mcp.provider import result_text

    try:
        result = mt.CallToolResult.model_validate({"content": raw, "structuredContent": structured})
    except ValidationError:
        return
    assert isinstance(result_text(result), str)


# -- the model's answers ------------------------------------------------------------------------------------------
TOOL_NAMES = ["fs_list_dir", "fs_write_text", "memory_remember", "jorb_list", "reminder_create", "time_now",
              "find_tools", "create_new_tool", "", "no_such_tool", "fs_list_dir\u202e"]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


raw_arguments = (json_values.map(json.dumps) | st.text(max_size=60)
                 | st.sampled_from(['{"path": ', "{}}", "null", '"x"', "[]", _nested(5000), '{"a": ' * 2000,
                                    json.dumps({"path": "x" * 40_000})]))
calls = st.lists(st.fixed_dictionaries({"name": st.sampled_from(TOOL_NAMES) | st.text(max_size=20),
                                        "arguments": raw_arguments}), min_size=1, max_size=3)


@FEW
@given(script=calls)
def test_a_model_answer_with_tool_calls_of_any_shape_ends_the_turn_cleanly(jarvis_env, script):
    """Malformed JSON, unknown or empty tool names, deep nesting, huge arguments: the turn goes on (each bad call
    is answered to the model as refused) and ends with an answer, never an exception."""
    from orchestrator.core.errors import ModelEndpointError

    jarvis_env.server.brain.load([])  # what an earlier example left unread
    jarvis_env.server.push({"tool_calls": script}, answer("done"))
    graph = jarvis_env.graph()
    thread = {"configurable": {"thread_id": f"fuzz-{abs(hash(json.dumps(script))) % 10**9}"}}
    try:
        out = graph.invoke({"messages": [("user", "go")]}, thread, version="v2")
    except ModelEndpointError as exc:  # a clear refusal: arguments too big for the model's window are not sent back
        assert "context window" in str(exc), exc
        return
    if not out.interrupts:  # a well-formed call of an effect asks first; anything else has been answered
        last = out.value["messages"][-1]
        assert last.type == "ai" and not last.tool_calls, last


# -- an agent program's JSON-RPC ----------------------------------------------------------------------------------
rpc_lines = (
    st.text(max_size=200)
    | json_values.map(json.dumps)
    | shaped(["jsonrpc", "method", "params", "id", "result", "error"],
             ["2.0", "reminders.create", "reminder.fire", "ok", 1, None]).map(json.dumps)
    | st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "method": st.just("reminders.create"), "id": json_values,
                             "params": shaped(["title", "when", "rrule", "webhook_url", "process_name",
                                               "description", "priority", "missed_policy"],
                                              [*DATES, "FREQ=MINUTELY", "http://127.0.0.1:9/", "a" * 600])})
    .map(json.dumps))


@pytest.fixture
def agent_pipe(jarvis_env):
    """An agent as the scheduler runs it (AgentManager, the real store), over a real pipe: what Jarvis answers is
    read back from a `cat` child."""
    from orchestrator.reminders.agents import AgentManager, _Running
    from orchestrator.reminders.store import ReminderStore

    manager = AgentManager(ReminderStore(jarvis_env.settings), ack_timeout_s=2, max_creates_per_hour=1000)
    agent = manager.agent(f"{sys.executable} -c pass")
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        yield agent, _Running(proc), proc
    finally:
        proc.kill()
        proc.wait()


@BOUNDED
@given(line=rpc_lines)
def test_an_agents_rpc_lines_of_any_shape_are_answered_or_skipped(agent_pipe, line):
    """Each request gets a JSON-RPC answer (a result or an error with a code), a notification or junk none; the
    scheduler never raises."""
    import select

    agent, run, proc = agent_pipe
    agent._handle_line(run, line.strip())
    try:
        sent = json.loads(line)
    except ValueError:
        sent = None
    if isinstance(sent, dict) and "method" in sent and "id" in sent:
        ready, _, _ = select.select([proc.stdout], [], [], 5)
        assert ready, f"no answer to {line[:200]!r}"
        reply = json.loads(proc.stdout.readline())
        assert reply["jsonrpc"] == "2.0" and ("result" in reply) != ("error" in reply), reply
        if "error" in reply:
            assert isinstance(reply["error"]["code"], int) and reply["error"]["message"]
