"""What a newcomer tripped on in the web UI, in the real browser (Debian's Chromium through Playwright) at a
phone's width (390 px) and a desktop's (1280 px): words that fit the cause, and nothing pushed off screen."""

from __future__ import annotations

import pytest

from tests.conftest import answer, tool_call
from tests.test_ui_browser import browser, open_ui, send  # noqa: F401 - fixtures

pytestmark = pytest.mark.browser
WIDTHS = [390, 1280]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_microphone_is_not_called_a_refusal(open_ui, width):
    # the page may use the microphone, but this machine has none (a headless browser without a fake device)
    page, _server = open_ui(viewport={"width": width, "height": 800}, permissions=["microphone"])
    page.get_by_role("button", name="Mic").click()
    note = page.locator(".composer .problem")
    note.wait_for()
    text = note.inner_text()
    assert "No microphone was found" in text and "allow" not in text, text


@pytest.mark.parametrize("width", WIDTHS)
def test_waiting_for_the_model_goes_once_it_answers(open_ui, jarvis_env, width):
    jarvis_env.write_config(models={"primary": {"progress_every_s": 0.2}})
    page, server = open_ui(viewport={"width": width, "height": 800})
    server.env.server.push({"content": "Here you are.", "delay_s": 2.0})
    send(page, "hello")
    waiting = page.locator(".log .progress", has_text="waiting for the model")
    waiting.first.wait_for()  # while it waits, the user sees why
    page.locator(".msg.assistant:not(.streaming)", has_text="Here you are.").wait_for()
    assert waiting.count() == 0, page.locator(".log").inner_text()  # not left behind to read as a failure
    assert page.js_errors == []


def on_screen(page, locator, width: int) -> None:
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, (box, width)
    assert box["y"] >= 0 and box["y"] + box["height"] <= page.viewport_size["height"] + 0.5, box
    # and not hidden: what a tap at its middle reaches is it (not clipped by a scrolled box, not under a drawer)
    hit = locator.evaluate("el => { const r = el.getBoundingClientRect();"
                           " return el.contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2)); }")
    assert hit, (box, "covered or scrolled out of view")


@pytest.mark.parametrize("width", WIDTHS)
def test_new_chat_and_a_tap_outside_close_the_threads_drawer(open_ui, width):
    page, server = open_ui(viewport={"width": width, "height": 800})
    server.env.server.push(answer("Noted."))
    send(page, "plants need water")
    page.get_by_text("Noted.").wait_for()
    threads = page.get_by_role("button", name="Threads")
    if width > 700:  # wide: the list is always there, no drawer
        assert not threads.is_visible()
        return
    threads.click()
    page.locator(".sidebar.open").wait_for()
    page.get_by_role("button", name="New chat").click()
    page.locator(".sidebar.open").wait_for(state="detached")  # the new conversation shows, not the list over it
    on_screen(page, threads, width)
    threads.click()
    page.locator(".sidebar.open").wait_for()
    page.mouse.click(width - 20, 400)  # a tap on the conversation, beside the drawer
    page.locator(".sidebar.open").wait_for(state="detached")
    assert threads.get_attribute("aria-expanded") == "false"
    assert page.js_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_reminders_and_runs_keep_every_button_on_screen(open_ui, width):
    from orchestrator.reminders import ReminderRequest, ReminderStore

    page, server = open_ui(viewport={"width": width, "height": 800})
    server.env.server.push(answer("Noted."))
    send(page, "a first message, so that a run is listed")
    page.get_by_text("Noted.").wait_for()
    ReminderStore(server.env.settings).create(ReminderRequest(
        title="Renew the passport and the identity card at the town hall before the summer holidays",
        when="2031-06-01T09:00", rrule="FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0",
        webhook_url="https://hooks.example.invalid/a/rather/long/path/for/a/webhook/endpoint"))
    page.get_by_role("link", name="Reminders").click()
    cancel = page.locator("table.reminders").get_by_role("button", name="Cancel")
    cancel.wait_for()
    cancel.scroll_into_view_if_needed()
    on_screen(page, cancel, width)
    page.get_by_role("link", name="Runs").click()
    row = page.locator("table.runs tbody tr").first
    row.wait_for()
    for cell in row.locator("td").all():
        box = cell.bounding_box()
        assert box["x"] + box["width"] <= width + 0.5, (cell.inner_text(), box)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.js_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_long_model_name_keeps_the_banner_buttons_on_screen(open_ui, jarvis_env, width):
    long_name = "Meta_Llama_3.1_70B_Instruct_abliterated_GGUF_Q4_K_M_imatrix_long_context_32k_v2"  # no break in it
    jarvis_env.write_config(models={"primary": {"base_url": "http://127.0.0.1:9/v1", "model": long_name}})
    page, _server = open_ui(viewport={"width": width, "height": 800})
    banner = page.locator("#banner", has_text="is not answering")
    banner.wait_for()
    for name in ("Settings", "Dismiss"):
        on_screen(page, banner.get_by_role("button", name=name), width)
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_the_trust_it_note_of_a_tainted_thread_is_in_view(open_ui, jarvis_env, width):
    page, server = open_ui(viewport={"width": width, "height": 800})
    doc = server.env.root / "doc.txt"
    doc.write_text("minutes")
    long = "\n\n".join(f"Point {i}: something worth a line of its own." for i in range(60))
    server.env.server.push(tool_call("fs_read_text", path=str(doc)), answer(long))
    send(page, "read doc.txt and tell me everything")
    page.get_by_text("Point 59").wait_for()
    page.reload()
    button = page.get_by_role("button", name="I checked what it read: trust it")
    button.wait_for()
    on_screen(page, button, width)  # seen without scrolling through the conversation
    button.click()
    page.locator(".pending-note.tainted").wait_for(state="detached")
    assert page.js_errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_a_run_whose_tool_call_failed_does_not_read_ok(open_ui, width):
    page, server = open_ui(viewport={"width": width, "height": 800})
    missing = server.env.root / "no-such-file.txt"
    server.env.server.push(tool_call("fs_read_text", path=str(missing)), answer("That file does not exist."))
    send(page, "read no-such-file.txt")
    page.get_by_text("That file does not exist.").wait_for()
    page.get_by_role("link", name="Runs").click()
    row = page.locator("table.runs tbody tr").first
    row.wait_for()
    status, tools = row.locator("td").nth(1), row.locator("td").nth(4)
    assert tools.inner_text() == "1 (1 failed)"
    assert status.inner_text() == "finished, 1 tool call failed"  # not "ok" beside a failure
    on_screen(page, status, width)
    row.get_by_role("link").first.click()
    page.locator(".run-detail p", has_text="finished, 1 tool call failed").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.js_errors == []
