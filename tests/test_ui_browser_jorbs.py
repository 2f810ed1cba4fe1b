"""The Jorbs, Inbox, Reminders and Tools views in a real browser (Debian's Chromium through Playwright).

Screenshots go to test-output/ui/.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import answer, tool_call
from tests.test_jorbs import step
from tests.test_missions import sheratan
from tests.test_server_jorbs import create, settled
from tests.test_ui_browser import browser, open_ui, send, shot  # noqa: F401 - fixtures

pytestmark = pytest.mark.browser


@pytest.fixture
def ui(open_ui, jarvis_env):
    jarvis_env.write_config(channels={"burst_window_s": 0.2})
    return open_ui


def script_errors(page) -> list[str]:
    """Errors of the page's scripts; an HTTP error the test provoked on purpose is shown in place, not one of them."""
    return [e for e in page.js_errors if not e.startswith("Failed to load resource")]


def test_create_a_jorb_see_it_wait_reply_as_the_counterpart_and_see_it_continue(ui):
    page, server = ui()
    server.env.server.push(
        step(reasoning="Contact Magic", script="jarvis.messages.send('local', '@magicapp', 'Hotels in Paris, March 15-20?')",
             await_reply=True),
        step(reasoning="3 options", pause=True, pause_reason="Magic found: Le Marais $175, Bastille $165. Which?"))
    page.get_by_role("link", name="Jorbs").click()
    page.get_by_role("button", name="New jorb or mission").click()
    page.get_by_label("Name").fill("Paris hotel")
    page.get_by_label("Plan or goal").fill("Ask Magic for hotels in Paris; pause before booking")
    page.get_by_label("Contacts (comma separated)").fill("@magicapp")
    page.get_by_role("button", name="Add override").click()
    page.get_by_label("Side effect").select_option("message_send")
    page.get_by_label("Mode").select_option("auto")
    grant = page.locator(".approve-overrides")
    assert "may act without asking for: message_send=auto" in grant.inner_text()
    page.get_by_role("button", name="Create").click()
    assert "I approve these autonomy overrides" in page.locator(".new-jorb .problem").inner_text()
    assert server.env.server.requests == []  # nothing created without the approval
    page.get_by_label("I approve these autonomy overrides").check()
    shot(page, "jorb-create")
    page.get_by_role("button", name="Create").click()

    page.locator(".jorb-head .jorb-status", has_text="waiting for a reply").wait_for()
    assert "Waiting for a reply from @magicapp on local" in page.locator(".pending-await_reply").inner_text()
    assert "Hotels in Paris, March 15-20?" in page.locator(".conversation-log").inner_text()
    assert "jarvis.messages.send" in page.locator(".scripts").inner_text()
    # The list refreshes after the detail: wait for it rather than read it at once.
    page.locator('.jorb-list li', has_text="Paris hotel").locator(".jorb-status", has_text="waiting for a reply").wait_for()
    shot(page, "jorb-waiting")

    assert page.get_by_label("from").input_value() == "@magicapp"
    page.get_by_label("Reply", exact=True).fill("Found: Le Marais 175, Bastille 165")
    page.get_by_role("button", name="Send reply").click()
    page.locator(".jorb-head .jorb-status", has_text="needs you").wait_for()
    assert "Which?" in page.locator(".pending-jorb_pause").inner_text()
    log = page.locator(".conversation-log").inner_text()
    assert "@magicapp →" in log and "Found: Le Marais 175, Bastille 165" in log
    assert "Found: Le Marais 175" in server.env.server.requests[1]["messages"][-1]["content"]
    shot(page, "jorb-paused")
    assert script_errors(page) == []


def test_approve_a_paused_jorb_and_a_script_confirmation_from_the_banner(ui):
    page, server = ui()
    srv = server.env.server
    srv.push(step(reasoning="ask", pause=True, pause_reason="Book Le Marais for $175?"))
    jid = create(server, name="Booking", plan="Book a hotel, ask first")["id"]
    settled(server, jid, status="paused")
    page.goto(f"{server.url}/#jorbs/{jid}")
    block = page.locator(".pending-jorb_pause")
    block.wait_for()
    assert "Book Le Marais for $175?" in block.inner_text()
    srv.push(step(reasoning="booked", done=True, result={"booked": "Le Marais"}))
    block.get_by_label("Note").fill("yes, go ahead")
    block.get_by_role("button", name="Approve").click()
    page.locator(".jorb-head .jorb-status", has_text="done").wait_for()
    assert '"booked": "Le Marais"' in page.locator(".result").inner_text()
    assert "yes, go ahead" in srv.requests[-1]["messages"][-1]["content"]
    shot(page, "jorb-approved")

    target = server.env.root / "report.txt"
    srv.push(step(reasoning="write", script=f"jarvis.fs.write_text({str(target)!r}, 'the report')"),
             step(reasoning="written", done=True, result="ok"))
    jid = create(server, name="Report", plan="Write the report")["id"]
    settled(server, jid, status="paused")
    page.goto(f"{server.url}/#chat")
    banner = page.locator("#banner", has_text="A jorb waits for your confirmation")
    banner.wait_for()
    assert "Report: Write 10 characters to" in banner.inner_text()
    banner.get_by_role("button", name="Review").click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    assert "Confirm: fs_write_text" in dialog.inner_text() and "fs_write" in dialog.inner_text()
    shot(page, "jorb-confirmation")
    dialog.get_by_role("button", name="Approve").click()
    page.locator(".jorb-head .jorb-status", has_text="done").wait_for()
    assert target.read_text() == "the report"
    assert page.locator("#banner").is_hidden()
    assert script_errors(page) == []


def test_assign_an_inbox_message_and_answer_a_local_message(ui):
    page, server = ui()
    srv = server.env.server
    srv.push(step(reasoning="ask", script="jarvis.messages.send('local', 'carol', 'Which dates?')", await_reply=True))
    jid = create(server, name="Dates", plan="Ask Carol for dates", autonomy={"message_send": "auto"},
                 approve_autonomy=True)["id"]
    settled(server, jid, status="awaiting_reply")
    srv.add_rule(lambda r: "You route an incoming message" in r["messages"][0]["content"],
                 {"content": json.dumps({"jorb_id": jid, "confidence": 0.4, "reasoning": "it mentions dates"})}, times=1)
    with server.client() as c:
        c.post("/api/inbound", json={"channel": "local", "sender": "carol.work", "text": "March 15-20 works"})
    page.get_by_role("link", name="Inbox").click()
    card = page.locator("article.inbox-msg")
    card.wait_for()
    text = card.inner_text()
    assert "carol.work" in text and "March 15-20 works" in text and "it mentions dates" in text and "low confidence" in text
    assert card.get_by_label("Assign to").input_value() == jid  # the switchboard's guess is preselected
    local = page.locator("article.local-msg")
    assert "to carol" in local.inner_text() and "Which dates?" in local.inner_text() and "awaits an answer" in local.inner_text()
    shot(page, "inbox")
    srv.push(step(reasoning="dates known; ask more", script="jarvis.messages.send('local', 'carol', 'How many people?')",
                  await_reply=True))
    card.get_by_role("button", name="Assign").click()
    page.locator(".done-note", has_text="given to Dates").wait_for()
    settled(server, jid, status="awaiting_reply", steps=2)
    assert "March 15-20 works" in srv.requests[-1]["messages"][-1]["content"]

    # Answer the jorb's new question as Carol, from the local channel list.
    page.get_by_role("button", name="Refresh").click()
    question = page.locator("article.local-msg", has_text="How many people?")
    question.wait_for()
    srv.push(step(reasoning="all known", done=True, result="March 15-20, two people"))
    question.get_by_label("Answer as carol").fill("Two of us")
    question.get_by_role("button", name="Send answer").click()
    question.locator(".routed", has_text=f"jorb {jid}").wait_for()
    assert settled(server, jid, status="done")["result"] == "March 15-20, two people"
    assert script_errors(page) == []


def test_a_mission_shows_its_rounds(ui):
    page, server = ui()
    ws = server.env.root / "project"
    ws.mkdir()
    (ws / "main.py").write_text("print('hello')\n")
    server.env.server.push(
        sheratan(action="create_followup_jobs", new_jobs=[{"name": "ListPy", "kind": "list_files", "params": {"patterns": ["*.py"]}}],
                 commentary="Starting with file discovery", btw="a small project"),
        sheratan(action="mission_complete", summary="Found one module"))
    jid = create(server, mode="mission", plan="List the project's modules", workspace=str(ws))["id"]
    settled(server, jid, status="done")
    page.goto(f"{server.url}/#jorbs/{jid}")
    page.locator('.round[data-round="1"]').wait_for()
    text = page.locator('.round[data-round="1"]').inner_text()
    assert "commentary: Starting with file discovery" in text and "btw: a small project" in text
    assert "ListPy" in text and "list_files" in text and "main.py" in text
    assert "Found one module" in page.locator(".result").inner_text()
    shot(page, "mission")
    assert script_errors(page) == []


def test_create_and_cancel_a_reminder(ui):
    page, server = ui()
    page.get_by_role("link", name="Reminders").click()
    page.locator(".reminder-list .empty").wait_for()
    page.get_by_label("Title").fill("Water the plants")
    page.get_by_label("When (your local time)").fill("2031-05-04T18:30")
    page.get_by_role("button", name="Create reminder").click()
    assert "is not a time Jarvis can read" not in page.locator(".new-reminder").inner_text()
    row = page.locator("tr.reminder", has_text="Water the plants")
    row.wait_for()
    assert "2031-05-04 18:30" in row.inner_text() and "pending" in row.inner_text() and "chat: reminders" in row.inner_text()
    page.get_by_label("Title").fill("Broken")
    page.get_by_label("When (your local time)").fill("2031-05-04T18:30")
    page.get_by_label("Target").select_option("webhook")
    page.get_by_role("button", name="Create reminder").click()
    assert "needs the webhook URL" in page.locator(".new-reminder .problem").inner_text()
    shot(page, "reminders")
    row.get_by_role("button", name="Cancel").click()
    page.locator("tr.reminder.status-cancelled", has_text="Water the plants").wait_for()
    assert row.get_by_role("button", name="Cancel").count() == 0
    assert server.env.settings.scheduler.enabled  # the problem line says the test server runs no scheduler
    assert "scheduler is not running" in page.locator(".scheduler-state").inner_text()
    assert script_errors(page) == []


def test_disable_a_tool_and_the_planner_no_longer_gets_it(ui, jarvis_env):
    jarvis_env.write_config(planner={"max_bound_tools": 200})  # every tool bound: a missing one was disabled
    page, server = ui()
    srv = server.env.server
    page.get_by_role("link", name="Tools").click()
    switch = page.get_by_label("fs_list_dir enabled")
    switch.wait_for()
    assert switch.is_checked()
    switch.uncheck()
    page.locator('article.tool.disabled[data-tool="fs_list_dir"]').wait_for()
    shot(page, "tool-disabled")
    page.get_by_role("link", name="Chat").click()
    srv.push(tool_call("fs_list_dir", path=str(server.env.root)), answer("Listing folders is switched off."))
    send(page, "what is in my folder?")
    page.locator(".msg.assistant", has_text="Listing folders is switched off.").wait_for()
    names = {t["function"]["name"] for t in srv.requests[0]["tools"]}
    assert "fs_list_dir" not in names and "fs_read_text" in names
    assert "the user disabled the tool fs_list_dir" in page.locator(".step.failed").inner_text()
    page.get_by_role("link", name="Settings").click()
    page.locator('section[aria-label="MCP servers"]', has_text="does not exist").wait_for()
    page.get_by_role("link", name="Tools").click()
    page.get_by_label("fs_list_dir enabled").check()
    page.locator('article.tool[data-tool="fs_list_dir"]:not(.disabled)').wait_for()
    page.get_by_role("link", name="Chat").click()
    srv.push(answer("ok"))
    send(page, "hi")
    page.locator(".msg.assistant", has_text="ok").wait_for()
    assert "fs_list_dir" in {t["function"]["name"] for t in srv.requests[-1]["tools"]}
    assert script_errors(page) == []


def test_a_failed_jorb_shows_why_and_retry_runs_its_step_again(ui, tmp_path, monkeypatch):
    from tests.app_helpers import jorb_service

    monkeypatch.setenv("JARVIS_TEST_FLAKY", str(tmp_path))
    page, server = ui()
    svc = jorb_service(server.env.settings)
    with pytest.raises(RuntimeError):
        svc.create("Flaky", "Do the thing", policy="heuristic:tests.helpers.flaky_decider:breaks_once")
    jorb_id = svc.list(statuses=None)[0].id
    page.goto(f"{server.url}/#jorbs/{jorb_id}")
    page.locator(".jorb-detail .problem", has_text="This jorb failed: RuntimeError: the decider broke").wait_for()
    shot(page, "jorb-failed")
    page.get_by_role("button", name="Retry the step").click()
    page.locator(".jorb-head .jorb-status", has_text="done").wait_for()
    assert "finished after the retry" in page.locator(".jorb-detail .result").inner_text()
    assert page.get_by_role("button", name="Retry the step").count() == 0
    assert script_errors(page) == []


def _hold_first_get(page, pattern: str) -> list:
    """Route `pattern`: the first GET is answered with what the server says now, but only when the test releases
    it (`held[0][0].fulfill(response=held[0][1])`); every other request goes through."""
    held: list = []

    def handle(route):
        if route.request.method == "GET" and not held:
            held.append((route, route.fetch()))
        else:
            route.continue_()

    page.route(pattern, handle)
    return held


def _wait_held(page, held: list) -> None:
    for _ in range(600):
        if held:
            return
        page.wait_for_timeout(50)
    raise AssertionError("the request to hold never came")


def _shows_and_keeps_fs_list_dir_off(page, server) -> None:
    """The view ends showing fs_list_dir switched off, as the server has it."""
    page.locator('article.tool.disabled[data-tool="fs_list_dir"]').wait_for()
    assert not page.get_by_label("fs_list_dir enabled").is_checked()
    with server.client() as c:
        listed = {t["name"]: t for t in c.get("/api/tools").json()["tools"]}
    assert listed["fs_list_dir"]["enabled"] is False
    assert script_errors(page) == []


def test_a_tools_list_fetched_before_a_switch_was_flipped_does_not_undo_it_on_screen(ui):
    # The race behind an earlier flaky run, made certain: a load of the list is under way (held here) when the
    # user flips a switch; that list says the tool is on. The view must not show it on when the answer lands.
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page, server = ui()
    page.get_by_role("link", name="Tools").click()
    switch = page.get_by_label("fs_list_dir enabled")
    switch.wait_for()
    held = _hold_first_get(page, "**/api/tools")
    page.get_by_role("button", name="Refresh").click()
    _wait_held(page, held)
    with page.expect_response(lambda r: r.url.endswith("/api/tools/fs_list_dir/disable")):
        switch.uncheck()
    try:
        with page.expect_request(lambda r: r.url.endswith("/api/tools") and r.method == "GET", timeout=10_000):
            held[0][0].fulfill(response=held[0][1])  # the stale list arrives; the view must ask again
    except PlaywrightTimeout:
        raise AssertionError("a list fetched before the flip arrived and the view did not fetch it again") from None
    _shows_and_keeps_fs_list_dir_off(page, server)


def test_an_older_jorbs_list_arriving_late_does_not_draw_over_a_newer_one(ui):
    page, server = ui()
    srv = server.env.server
    srv.push(step(reasoning="wait", pause=True, pause_reason="first one waits"))
    first = create(server, name="First errand", plan="Wait for me")
    settled(server, first["id"], status="paused")
    page.get_by_role("link", name="Jorbs").click()
    page.locator(".jorb-list li", has_text="First errand").wait_for()
    held = _hold_first_get(page, "**/api/jorbs")
    page.get_by_role("button", name="Refresh").click()
    _wait_held(page, held)  # this answer knows only the first jorb
    srv.push(step(reasoning="wait", pause=True, pause_reason="second one waits"))
    second = create(server, name="Second errand", plan="Wait for me too")
    settled(server, second["id"], status="paused")
    page.get_by_role("button", name="Refresh").click()
    page.locator(".jorb-list li", has_text="Second errand").wait_for()
    with page.expect_event("requestfinished", lambda r: r.url.endswith("/api/jorbs")):
        held[0][0].fulfill(response=held[0][1])
    page.wait_for_timeout(300)  # the page has read the late answer by now; it must have dropped it
    assert page.locator(".jorb-list li", has_text="Second errand").count() == 1
    assert script_errors(page) == []


def test_a_tools_list_fetched_while_a_switch_is_on_its_way_does_not_undo_it_on_screen(ui):
    # The race behind a red CI run: the list was fetched while the user's flip was still on its way to the server,
    # so it showed the tool as it was; the user's second click then asked to enable an enabled tool (409) and the
    # switch fell back. A list fetched while a flip is in flight must wait for the flip and be fetched again.
    page, server = ui()
    page.get_by_role("link", name="Tools").click()
    switch = page.get_by_label("fs_list_dir enabled")
    switch.wait_for()
    held: list = []
    page.route("**/api/tools/fs_list_dir/disable", lambda route: held.append(route))
    switch.uncheck()
    _wait_held(page, held)
    with page.expect_response(lambda r: r.url.endswith("/api/tools") and r.request.method == "GET"):
        page.get_by_role("button", name="Refresh").click()
    page.wait_for_timeout(200)  # the list that says "enabled" has landed; the view must not draw it
    assert not page.get_by_label("fs_list_dir enabled").is_checked()
    with page.expect_request(lambda r: r.url.endswith("/api/tools") and r.method == "GET", timeout=10_000):
        held[0].continue_()
    _shows_and_keeps_fs_list_dir_off(page, server)


def test_a_jorbs_script_is_shown_as_it_runs(ui):
    """A bidirectional isolate in a comment of a model's script moves the code shown ("Trojan Source"): the script
    results show it written out."""
    page, server = ui()
    script = "x = 1  # \u2067 ignore\u2069 \u2066\nx"
    server.env.server.push(step(reasoning="count", script=script), step(reasoning="done", done=True, result="1"))
    jid = create(server, name="Count", plan="Count to one")["id"]
    settled(server, jid, status="done")
    page.goto(f"{server.url}/#jorbs/{jid}")
    code = page.locator(".script-code").first
    code.wait_for()
    assert code.inner_text() == "x = 1  # \\u2067 ignore\\u2069 \\u2066\nx"
    assert script_errors(page) == []
