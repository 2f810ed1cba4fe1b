"""What a newcomer tripped on in the web UI, in the real browser (Debian's Chromium through Playwright) at a
phone's width (390 px) and a desktop's (1280 px): words that fit the cause, and nothing pushed off screen."""

from __future__ import annotations

import pytest

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
