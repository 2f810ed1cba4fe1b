"""The Jorbs and Inbox views' API and POST /api/inbound, over real HTTP against the scripted model server:
seed 000's hotel example end to end over the `local` channel, confirmations of jorb scripts, human steps,
missions' rounds, the inbox."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_jorbs import step
from tests.test_missions import sheratan
from tests.ui_server import UIServer, start_ui


@pytest.fixture
def ui(jarvis_env):
    jarvis_env.write_config(channels={"burst_window_s": 0.2})
    with start_ui(jarvis_env) as server:
        yield server


def settled(server: UIServer, jorb_id: str, timeout: float = 30.0, **expect: Any) -> dict[str, Any]:
    """GET the jorb until it is not working (and has the expected fields)."""
    deadline = time.monotonic() + timeout
    with server.client() as c:
        while True:
            j = c.get(f"/api/jorbs/{jorb_id}").json()
            if not j["working"] and j["status"] not in ("planning", "running") and all(j.get(k) == v for k, v in expect.items()):
                return j
            if time.monotonic() > deadline:
                raise AssertionError(f"jorb {jorb_id} did not settle: {json.dumps(j, default=str)[:2000]}")
            time.sleep(0.05)


def events(server: UIServer) -> list[str]:
    return [r["messages"][-1]["content"] for r in server.env.server.requests]


def create(server: UIServer, **body: Any) -> dict[str, Any]:
    with server.client() as c:
        resp = c.post("/api/jorbs", json=body)
    assert resp.status_code == 201, resp.text
    return resp.json()


HOTEL = dict(name="Paris hotel", plan="Ask Magic for hotels in Paris; pause before booking", contacts=["@magicapp"],
             autonomy={"message_send": "auto"}, approve_autonomy=True)


@pytest.fixture
def ui_burst(jarvis_env):
    """Two messages posted one after the other must fall in one burst however loaded the machine: a window of 0.2 s
    could pass between the two requests (the second message then woke the jorb a second time)."""
    jarvis_env.write_config(channels={"burst_window_s": 2.0})
    with start_ui(jarvis_env) as server:
        yield server


def test_hotel_example_over_the_local_channel_through_post_inbound(ui_burst):
    ui = ui_burst
    srv = ui.env.server
    srv.push(
        step(reasoning="Contact Magic", script="jarvis.messages.send('local', '@magicapp', 'Hotels in Paris, March 15-20?')",
             await_reply=True),
        step(reasoning="3 options", pause=True, pause_reason="Magic found: 1. Le Marais $175 2. Bastille $165. Which?"),
        step(reasoning="Book it", script="jarvis.messages.send('local', '@magicapp', 'Please book Le Marais')", await_reply=True),
        step(reasoning="Booked", done=True, result={"hotel": "Le Marais", "confirmation": "123"}),
    )
    with ui.client() as c:
        # Autonomy overrides are approved explicitly, or the jorb is not created.
        refused = c.post("/api/jorbs", json={**HOTEL, "approve_autonomy": False})
        assert refused.status_code == 400 and "message_send=auto" in refused.json()["detail"]
        assert c.get("/api/jorbs?all=1").json() == []
    jid = create(ui, **HOTEL)["id"]
    j = settled(ui, jid, status="awaiting_reply")
    assert j["waiting_party"] == "@magicapp" and j["pending"][0]["type"] == "await_reply"
    assert [(h["role"], h["text"]) for h in j["history"]] == [("jarvis", "Hotels in Paris, March 15-20?")]
    assert j["script_results"][0]["step"] == 1 and j["can"]["reply"]
    with ui.client() as c:
        listed = c.get("/api/jorbs").json()
        assert [(r["id"], r["status"]) for r in listed] == [(jid, "awaiting_reply")]
        # What the jorb sent on `local` is in the inbox view, to be answered as the counterpart.
        local = c.get("/api/inbox").json()["local"]
        assert [(m["party"], m["text"], m["jorb_id"], m["awaited"]) for m in local] == [
            ("@magicapp", "Hotels in Paris, March 15-20?", jid, True)]
        # Magic answers (another spelling of the handle): two messages in a burst wake the jorb once.
        first = c.post("/api/inbound", json={"channel": "local", "sender": "@MagicApp", "text": "Found: Le Marais 175,"})
        assert first.status_code == 200, first.text
        route = first.json()
        assert route["jorb_id"] == jid and route["status"] == "routed" and "contact of jorb" in route["reasoning"]
        c.post("/api/inbound", json={"channel": "local", "sender": "@magicapp", "text": "Bastille 165"})
    j = settled(ui, jid, status="paused")
    assert len(srv.requests) == 2 and "Found: Le Marais 175," in events(ui)[1] and "Bastille 165" in events(ui)[1]
    (pause,) = j["pending"]
    assert pause["type"] == "jorb_pause" and "Which?" in pause["reason"] and "Which?" in j["pause_reason"]

    with ui.client() as c:
        stale = c.post(f"/api/jorbs/{jid}/decide", json={"interrupt_id": "nope", "action": "approve"})
        assert stale.status_code == 409 and "no longer waits" in stale.json()["detail"]
        ok = c.post(f"/api/jorbs/{jid}/decide", json={"interrupt_id": pause["interrupt_id"], "action": "approve",
                                                      "note": "Le Marais please"})
        assert ok.status_code == 200, ok.text
    settled(ui, jid, status="awaiting_reply")
    assert '"approved"' in events(ui)[2] and "Le Marais please" in events(ui)[2]
    with ui.client() as c:
        c.post("/api/inbound", json={"channel": "local", "sender": "@magicapp", "text": "Booked! Confirmation 123"})
    j = settled(ui, jid, status="done")
    assert j["result"] == {"hotel": "Le Marais", "confirmation": "123"} and j["pending"] == []
    assert [(h["role"], h["text"]) for h in j["history"]] == [
        ("jarvis", "Hotels in Paris, March 15-20?"), ("counterpart", "Found: Le Marais 175,"),
        ("counterpart", "Bastille 165"), ("jarvis", "Please book Le Marais"), ("counterpart", "Booked! Confirmation 123")]
    assert not j["can"]["reply"] and not j["can"]["cancel"]
    with ui.client() as c:
        assert c.get("/api/jorbs").json() == []  # finished jorbs only with ?all=1
        assert [r["status"] for r in c.get("/api/jorbs?all=1").json()] == ["done"]
        done = c.post(f"/api/jorbs/{jid}/reply", json={"text": "one more thing"})
        assert done.status_code == 400 and "done" in done.json()["detail"]


def test_inbound_for_nobody_goes_to_the_inbox_and_bad_input_is_refused(ui):
    with ui.client() as c:
        route = c.post("/api/inbound", json={"channel": "local", "sender": "+1 (415) 555-0100", "text": "Hi?"}).json()
        assert route == {"jorb_id": None, "status": "unmatched", "reasoning": route["reasoning"], "confidence": 1.0,
                         "flags": [], "is_user": False}
        assert "no open jorb" in route["reasoning"]
        inbox = c.get("/api/inbox").json()["messages"]
        assert [(m["party"], m["status"]) for m in inbox] == [("+14155550100", "unmatched")]
        assert c.post("/api/inbound", json={"channel": "local", "sender": "x"}).status_code == 422
        assert c.post("/api/inbound", json={"channel": "Local Chan", "sender": "x", "text": "y"}).status_code == 422
        missing = c.post("/api/inbound", json={"channel": "local", "sender": "x", "text": "y", "jorb_id": "abc"})
        assert missing.status_code == 404 and "no jorb 'abc'" in missing.json()["detail"]
    with ui.client(token="wrong") as c:
        assert c.post("/api/inbound", json={"channel": "local", "sender": "x", "text": "y"}).status_code == 401
    with ui.client(Origin="http://evil.example") as c:
        assert c.post("/api/inbound", json={"channel": "local", "sender": "x", "text": "y"}).status_code == 403


def test_a_jorb_script_confirmation_is_listed_pending_and_answered_through_the_dialog_api(ui):
    target = ui.env.root / "report.txt"
    script = f"jarvis.fs.write_text({str(target)!r}, 'the report')\n'written'"
    ui.env.server.push(step(reasoning="write", script=script), step(reasoning="done", done=True, result="ok"))
    jid = create(ui, name="Report", plan="Write the report")["id"]
    j = settled(ui, jid, status="paused")
    (asked,) = j["pending"]
    assert asked["type"] == "confirmation" and asked["tool"] == "fs_write_text" and asked["side_effects"] == ["fs_write"]
    with ui.client() as c:
        pending = c.get("/api/pending").json()
        assert [(p["thread_id"], p["interrupt_id"]) for p in pending] == [(f"jorb:{jid}", asked["interrupt_id"])]
        assert pending[0]["summary"].startswith("Write 10 characters to")
        wrong = c.post(f"/api/jorbs/{jid}/resume", json={"decisions": {"other": {"decision": "approve"}}})
        assert wrong.status_code == 409
        bad_edit = c.post(f"/api/jorbs/{jid}/resume", json={"decisions": {asked["interrupt_id"]: {"decision": "edit"}}})
        assert bad_edit.status_code == 400 and "args" in bad_edit.json()["detail"]
        ok = c.post(f"/api/jorbs/{jid}/resume", json={"decisions": {asked["interrupt_id"]: {
            "decision": "edit", "args": {"path": str(target), "content": "edited report"}}}})
        assert ok.status_code == 200 and ok.json()["working"] is True
        again = c.post(f"/api/jorbs/{jid}/resume", json={"decisions": {asked["interrupt_id"]: {"decision": "approve"}}})
        assert again.status_code == 409  # working, or the question moved on: never a second answer
    j = settled(ui, jid, status="done")
    assert target.read_text() == "edited report" and j["result"] == "ok"
    with ui.client() as c:
        assert c.get("/api/pending").json() == []


@pytest.fixture
def ui_unsandboxed(jarvis_env):
    """Jorb scripts as plain child processes: the test coordinates with a script through files on the host."""
    jarvis_env.write_config(channels={"burst_window_s": 0.2}, sandbox={"required": False, "backend": "none"})
    with start_ui(jarvis_env) as server:
        yield server


def _slow_step_started(ui: UIServer) -> tuple[str, Path]:
    """A jorb whose step runs until the file `go` appears, then waits for a reply: (its id, `go`), once the
    step is running."""
    marker, go = ui.env.root / "started", ui.env.root / "go"
    script = (f"open({str(marker)!r}, 'w').write('x')\nimport os, time\n"
              f"for _ in range(400):\n    if os.path.exists({str(go)!r}): break\n    time.sleep(0.05)")
    ui.env.server.push(step(reasoning="slow", script=script, await_reply=True))
    jid = create(ui, name="Slow", plan="p")["id"]
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists()
    return jid, go


def test_cancel_while_a_confirmation_waits_runs_nothing_more(ui_unsandboxed):
    ui = ui_unsandboxed
    target = ui.env.root / "never.txt"
    ui.env.server.push(step(reasoning="write", script=f"jarvis.fs.write_text({str(target)!r}, 'x')\n"
                                                      "jarvis.messages.send('local', 'bob', 'written')"),
                       step(reasoning="more", script="jarvis.time.now()", done=True))
    jid = create(ui, name="Cancel me", plan="p", autonomy={"message_send": "auto"}, approve_autonomy=True)["id"]
    settled(ui, jid, status="paused")
    with ui.client() as c:
        assert c.post(f"/api/jorbs/{jid}/cancel").status_code == 200
    j = settled(ui, jid, status="cancelled")
    assert j["pending"] == [] and not target.exists() and len(ui.env.server.requests) == 1
    assert ui.env.server.brain.remaining == 1  # the next step was never asked for
    ui.env.server.brain.load([])
    assert j["history"] == []  # the rest of the script did not run
    with ui.client() as c:
        again = c.post(f"/api/jorbs/{jid}/cancel")
        assert again.status_code == 400 and "already cancelled" in again.json()["detail"]

    # Cancelled while its step runs: the step ends, parks to wait for a reply, and is stopped there.
    jid, go = _slow_step_started(ui)
    with ui.client() as c:
        now = c.get(f"/api/jorbs/{jid}").json()
        assert now["working"] is True, now
        assert c.post(f"/api/jorbs/{jid}/cancel").status_code == 200
    go.write_text("go")
    j = settled(ui, jid, status="cancelled")
    assert j["pending"] == [] and len(j["script_results"]) == 1


def test_reply_as_counterpart_and_as_user_human_step_and_policy_swap(ui):
    srv = ui.env.server
    jid = create(ui, name="Clock (human)", plan="Check the time", policy="human")["id"]
    j = settled(ui, jid, status="awaiting_reply")
    (asked,) = j["pending"]
    assert asked["type"] == "human_step" and "Clock (human)" in asked["prompt"]
    with ui.client() as c:
        bad = c.post(f"/api/jorbs/{jid}/step", json={"interrupt_id": asked["interrupt_id"], "step": {"reasoning": "x"}})
        assert bad.status_code == 400 and "the step does nothing" in bad.json()["detail"]
        ok = c.post(f"/api/jorbs/{jid}/step", json={"interrupt_id": asked["interrupt_id"], "step": {
            "reasoning": "ask Bob", "script": "jarvis.messages.send('local', 'bob', 'what time is it?')", "await_reply": True}})
        assert ok.status_code == 200, ok.text
    j = settled(ui, jid, status="paused")  # messages_send asks first: no override for this jorb
    (confirm,) = j["pending"]
    with ui.client() as c:
        c.post(f"/api/jorbs/{jid}/decide", json={"interrupt_id": confirm["interrupt_id"], "action": "approve"})
    j = settled(ui, jid, status="awaiting_reply", waiting_party="bob")
    # The model takes over from the person; then Bob answers and the user adds a word of their own.
    with ui.client() as c:
        swapped = c.post(f"/api/jorbs/{jid}/policy", json={"policy": "llm"})
        assert swapped.status_code == 200 and swapped.json()["policy"] == "llm"
        assert c.post(f"/api/jorbs/{jid}/policy", json={"policy": "heuristic:nope"}).status_code == 400
        srv.push(step(reasoning="got it", done=True, result="noon"))
        c.post(f"/api/jorbs/{jid}/reply", json={"text": "it is noon", "party": "bob"})
    j = settled(ui, jid, status="done")
    assert j["result"] == "noon" and ("counterpart", "bob", "it is noon") in [(h["role"], h["party"], h["text"]) for h in j["history"]]

    # Scripted before the jorb exists: its first step starts as soon as it is created.
    srv.push(step(reasoning="ask", script="jarvis.messages.send('local', 'bob', 'hi?')", await_reply=True))
    jid = create(ui, name="Ask Bob", plan="p", autonomy={"message_send": "auto"}, approve_autonomy=True)["id"]
    settled(ui, jid, status="awaiting_reply", waiting_party="bob")
    srv.push(step(reasoning="the user said stop", done=True, result="stopped"))
    with ui.client() as c:
        c.post(f"/api/jorbs/{jid}/reply", json={"text": "never mind, I called him", "as_user": True})
    j = settled(ui, jid, status="done")
    assert ("user", "never mind, I called him") in [(h["role"], h["text"]) for h in j["history"]]
    assert '"role": "user"' in events(ui)[-1]


def test_a_mission_shows_rounds_jobs_commentary_and_answers_its_question(ui, tmp_path):
    ws = ui.env.root / "project"
    ws.mkdir()
    (ws / "main.py").write_text("print('hello')\n")
    srv = ui.env.server
    srv.push(
        sheratan(action="create_followup_jobs", new_jobs=[{"name": "ListPy", "kind": "list_files",
                                                           "params": {"patterns": ["*.py"]}}],
                 commentary="Starting with file discovery", btw="one file only"),
        sheratan(action="create_followup_jobs", new_jobs=[], ask="Should the docs be in English?"),
        sheratan(action="mission_complete", summary="Documented in English"),
    )
    with ui.client() as c:
        wrong = c.post("/api/jorbs", json={"mode": "mission", "plan": "Document the project", "workspace": str(tmp_path / "no")})
        assert wrong.status_code == 400 and "not a folder" in wrong.json()["detail"]
    jid = create(ui, mode="mission", plan="Document the project", workspace=str(ws))["id"]
    j = settled(ui, jid, status="paused")
    assert j["mode"] == "mission" and j["name"] == "Document the project"
    first, second = j["rounds"]
    assert [(n["kind"], n["text"]) for n in first["notes"]] == [("commentary", "Starting with file discovery"),
                                                                ("btw", "one file only")]
    (job,) = first["jobs"]
    assert job["job"] == "ListPy" and job["ok"] and "main.py" in json.dumps(job["result"])
    (ask,) = j["pending"]
    assert ask["type"] == "jorb_pause" and ask["kind"] == "ask" and ask["reason"] == "Should the docs be in English?"
    with ui.client() as c:
        c.post(f"/api/jorbs/{jid}/decide", json={"interrupt_id": ask["interrupt_id"], "action": "approve", "note": "yes, English"})
    j = settled(ui, jid, status="done")
    assert j["result"] == {"summary": "Documented in English"}
    assert ("answer", "yes, English") in [(n["kind"], n["text"]) for n in j["rounds"][1]["notes"]]
    assert "yes, English" in events(ui)[-1]


def test_inbox_assign_and_start_a_new_jorb(ui):
    srv = ui.env.server
    srv.push(step(reasoning="ask", script="jarvis.messages.send('local', 'carol', 'Which dates?')", await_reply=True))
    jid = create(ui, name="Dates", plan="Ask Carol for dates", autonomy={"message_send": "auto"}, approve_autonomy=True)["id"]
    settled(ui, jid, status="awaiting_reply")
    with ui.client() as c:
        # Carol writes from another address: the switchboard model is not sure, so it waits in the inbox.
        srv.add_rule(lambda r: "You route an incoming message" in r["messages"][0]["content"],
                     {"content": json.dumps({"jorb_id": jid, "confidence": 0.4, "reasoning": "mentions dates"})}, times=1)
        route = c.post("/api/inbound", json={"channel": "local", "sender": "carol.work", "text": "March 15-20"}).json()
        assert route["status"] == "low_confidence" and route["jorb_id"] is None
        inbox = c.get("/api/inbox").json()
        (msg,) = inbox["messages"]
        assert msg["status"] == "low_confidence" and "mentions dates" in msg["reasoning"] and f"maybe jorb {jid}" in msg["reasoning"]
        assert [j["id"] for j in inbox["jorbs"]] == [jid]
        srv.push(step(reasoning="got the dates", done=True, result="March 15-20"))
        assigned = c.post(f"/api/inbox/{msg['id']}/assign", json={"jorb_id": jid})
        assert assigned.status_code == 200, assigned.text
        again = c.post(f"/api/inbox/{msg['id']}/assign", json={"jorb_id": jid})
        assert again.status_code == 409 and "already assigned" in again.json()["detail"]
    j = settled(ui, jid, status="done")
    assert j["result"] == "March 15-20" and "March 15-20" in events(ui)[-1]
    with ui.client() as c:
        assert c.get("/api/inbox").json()["messages"] == []
        c.post("/api/inbound", json={"channel": "local", "sender": "dave", "text": "Can you water my plants?"})
        (msg,) = c.get("/api/inbox").json()["messages"]
        srv.push(step(reasoning="wait", await_reply=True))
        made = c.post(f"/api/inbox/{msg['id']}/new-jorb", json={"name": "Dave's plants"})
        assert made.status_code == 201, made.text
        new = made.json()
        assert new["contacts"] == ["dave"] and "water my plants" in new["plan"]
        assert c.post("/api/inbox/99999/assign", json={"jorb_id": jid}).status_code == 404
    settled(ui, new["id"], status="awaiting_reply")


def test_a_cancel_landing_after_a_step_is_never_seen_half_done(ui_unsandboxed, monkeypatch):
    # The race behind a red run: a jorb cancelled while its step ran parks, then the cancel is applied again and the
    # parked wait resumed with "cancel". Between the two it read as settled ("cancelled", not working) while its
    # wait was still pending. Made certain here by slowing the follow-up down.
    from orchestrator.jorbs.service import JorbService

    ui = ui_unsandboxed
    real_go = JorbService._go

    def slow_go(self, view, graph_input, wait):
        time.sleep(0.5)
        return real_go(self, view, graph_input, wait)

    monkeypatch.setattr(JorbService, "_go", slow_go)
    jid, go = _slow_step_started(ui)
    with ui.client() as c:
        assert c.post(f"/api/jorbs/{jid}/cancel").status_code == 200
    go.write_text("go")
    j = settled(ui, jid, status="cancelled")
    assert j["pending"] == [], j["pending"]


def test_the_cli_and_the_ui_say_who_a_reply_is_from_the_same_way(ui):
    """One jorb service for both: a reply without a party, to a jorb waiting for the user's own step, is from the
    jorb's contact whichever way it was sent (the CLI used to log it as the user's, the UI as the contact's)."""
    jid = create(ui, name="Clock (human)", plan="Check the time", policy="human", contacts=["@ana"])["id"]
    settled(ui, jid, status="awaiting_reply", waiting_party="user")
    ui.env.cli("jorbs", "reply", jid, "from the terminal", check=True)
    with ui.client() as c:
        assert c.post(f"/api/jorbs/{jid}/reply", json={"text": "from the browser"}).status_code == 200
    j = settled(ui, jid, status="awaiting_reply")
    said = {m["text"]: (m["party"], m["is_user"]) for m in j["queued"]}  # until the jorb next waits for a reply
    assert said == {"from the terminal": ("@ana", False), "from the browser": ("@ana", False)}, said
