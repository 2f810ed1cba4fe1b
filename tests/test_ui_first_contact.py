"""What a newcomer tripped on in the web UI, in the real browser (Debian's Chromium through Playwright) at a
phone's width (390 px) and a desktop's (1280 px): words that fit the cause, and nothing pushed off screen."""

from __future__ import annotations

import pytest

from tests.test_ui_browser import browser, open_ui  # noqa: F401 - fixtures

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
