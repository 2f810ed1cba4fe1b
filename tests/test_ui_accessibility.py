"""Accessibility of every view, checked by axe-core (Deque's rules engine, WCAG 2 A and AA) in a real browser, and
the keyboard: every control of the chat reachable with Tab, the confirmation answerable without a mouse."""

from __future__ import annotations

import pytest

from tests.conftest import answer, tool_call
from tests.test_ui_browser import browser, open_ui, send  # noqa: F401 - fixtures

VIEWS = ["chat", "jorbs", "inbox", "tools", "runs", "reminders", "memory", "settings"]


def _axe(page) -> list[dict]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa"]},
                                       "resultTypes": ["violations"]})
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n["target"] for n in v["nodes"]][:5]} for v in results.response["violations"]]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_view_passes_axe(open_ui, scheme):
    pytest.importorskip("axe_playwright_python")
    # axe is injected as a script; the page's CSP allows only its own
    page, server = open_ui(bypass_csp=True, color_scheme=scheme)
    (server.env.root / "a.txt").write_text("x")
    server.env.server.push(tool_call("fs_list_dir", path=str(server.env.root)), answer("One file: **a.txt**."))
    send(page, "what is in my folder?")
    page.locator(".msg.assistant", has_text="One file").wait_for()
    found = {}
    for view in VIEWS:
        page.goto(f"{server.url}/#{view}")
        page.locator("#views > *:not([hidden])").first.wait_for()
        page.wait_for_timeout(300)  # the view's first load
        found[view] = _axe(page)
    # the confirmation dialog, open
    page.goto(f"{server.url}/#chat")
    server.env.server.push(tool_call("fs_write_text", path=str(server.env.root / "b.txt"), content="hi"), answer("ok"))
    send(page, "write hi to b.txt")
    page.get_by_role("dialog").wait_for()
    found["confirmation dialog"] = _axe(page)
    bad = {k: v for k, v in found.items() if v}
    assert not bad, "\n".join(f"{view}: {v['id']} ({v['impact']}) {v['help']}: {v['nodes']}"
                                for view, vs in bad.items() for v in vs)


def test_a_view_still_loading_passes_axe_too(open_ui):
    """The check above scans each view 300 ms after it opens: on a loaded machine the Jorbs list was still empty,
    and axe refused its aria-label on a plain div (allowed, once the list had text, as "needs review"). A view is
    scanned here before its data comes (the request held), so what it shows while loading passes as well."""
    pytest.importorskip("axe_playwright_python")
    page, server = open_ui(bypass_csp=True)
    page.route("**/api/jorbs", lambda route: None)  # never answered: the list stays as it is before its data
    page.goto(f"{server.url}/#jorbs")
    page.locator(".jorb-list").wait_for(state="attached")
    assert _axe(page) == []


def test_the_chat_is_usable_from_the_keyboard(open_ui):
    page, server = open_ui()
    reached = set()
    for _ in range(40):
        page.keyboard.press("Tab")
        reached.add(page.evaluate("document.activeElement && (document.activeElement.getAttribute('aria-label') "
                                  "|| document.activeElement.textContent || '').trim().slice(0, 40)"))
    for control in ("Message", "Send", "Attach", "New chat", "Settings", "Tools"):
        assert control in reached, (control, sorted(reached))
    # a confirmation answered without a mouse: Deny has the focus, Enter denies, nothing is written
    server.env.server.push(tool_call("fs_write_text", path=str(server.env.root / "k.txt"), content="hi"),
                           answer("Not written."))
    page.get_by_role("textbox", name="Message").focus()
    page.keyboard.type("write hi to k.txt")
    page.keyboard.press("Enter")
    page.get_by_role("dialog").wait_for()
    page.keyboard.press("Enter")
    page.locator(".msg.assistant", has_text="Not written.").wait_for()
    assert not (server.env.root / "k.txt").exists()
