"""The Memory view: its API over real HTTP (browse, search, add, edit, forget, hidden when memory is off) and the
page in Chromium (a fact added by hand, an untrusted one marked with what the thread had read, forgetting one)."""

from __future__ import annotations

import pytest

from orchestrator.memory import Provenance, SourceKind
from tests.test_ui_browser import browser, open_ui, shot  # noqa: F401 - fixtures
from tests.ui_server import start_ui, ui_server  # noqa: F401 - fixture


def test_memory_api_browse_search_edit_forget(ui_server):
    with ui_server.client() as c:
        assert "memory" in [v["name"] for v in c.get("/api/views").json()]
        empty = c.get("/api/memory").json()
        assert empty["entities"] == [] and "person" in empty["kinds"]
        bad = c.post("/api/memory/facts", json={"fact": "x", "about": "Zog", "kind": "spaceship"})
        assert bad.status_code == 400 and "unknown entity kind" in bad.json()["detail"]
        assert c.post("/api/memory/facts", json={"fact": "  "}).status_code == 400
        assert c.post("/api/memory/facts", json={"fact": "x", "expires": "soon"}).status_code == 400
        made = c.post("/api/memory/facts", json={"fact": "Dr Lee is my dentist", "about": "Dr Lee", "kind": "person"})
        assert made.status_code == 201, made.text
        fact = made.json()
        assert fact["trusted"] and fact["source_kind"] == "manual" and "written by the user" in fact["source"]
        (entity,) = c.get("/api/memory").json()["entities"]
        assert entity["name"] == "Dr Lee" and entity["facts"] == 1
        shown = c.get(f"/api/memory/entities/{entity['id']}").json()
        assert [f["text"] for f in shown["facts"]] == ["Dr Lee is my dentist"]
        assert [f["id"] for f in c.get("/api/memory/facts?q=dentist").json()] == [fact["id"]]

        edited = c.patch(f"/api/memory/facts/{fact['id']}", json={"fact": "Dr Lee was my dentist until 2026",
                                                                  "expires": "2030-01-01"})
        assert edited.status_code == 200 and edited.json()["expires_at"].startswith("2030-01-01")
        assert c.patch("/api/memory/facts/999", json={"fact": "x"}).status_code == 404
        assert c.get("/api/memory/entities/0").status_code == 422  # ids are positive
        assert c.delete(f"/api/memory/facts/{fact['id']}").json() == {"forgotten": fact["id"]}
        assert c.get("/api/memory/facts?q=dentist").json() == []
        assert c.delete(f"/api/memory/entities/{entity['id']}").json()["forgotten"] == "Dr Lee"
        assert c.get("/api/memory").json()["stats"]["entities"] == 0

        assert c.get("/api/memory/proposals").json() == []
        assert c.post("/api/memory/proposals/7/accept").status_code == 404
        assert c.post("/api/memory/proposals/7/approve").status_code == 422


def test_memory_view_is_gone_when_memory_is_off(jarvis_env):
    jarvis_env.write_config(memory={"enabled": False})
    with start_ui(jarvis_env) as server, server.client() as c:
        assert "memory" not in [v["name"] for v in c.get("/api/views").json()]
        assert c.get("/api/memory").status_code == 404


@pytest.mark.browser
def test_the_memory_view_adds_shows_and_forgets(open_ui, jarvis_env):
    page, server = open_ui()
    store = jarvis_env.app().memory  # the same database as the server's
    store.remember("bank account is GB29EVIL", Provenance(SourceKind.CONTENT, False, "thread doc",
                                                          "read: fs_read_text path=/home/me/statement.txt"),
                   about="bank account", kind="account")
    from orchestrator.memory.models import MemoryProposal, ProposalStatus

    with store._session() as s, s.begin():  # what the extraction leaves after a turn (tests/test_memory.py)
        s.add(MemoryProposal(fact="My sister Ana lives in Porto", about="Ana", kind="person", thread_id="P",
                             status=ProposalStatus.PENDING))
    page.get_by_role("link", name="Memory").click()
    proposal = page.locator(".memory-proposals li", has_text="My sister Ana lives in Porto")
    proposal.get_by_role("button", name="Remember").click()
    page.locator(".memory-entities li", has_text="Ana").wait_for()
    assert page.locator(".memory-proposals li").count() == 0
    row = page.locator("tr.fact.untrusted", has_text="GB29EVIL")
    row.wait_for()
    assert "from outside content" in row.inner_text() and "thread doc" in row.inner_text()
    assert "read: fs_read_text path=/home/me/statement.txt" in row.locator(".fact-read").inner_text()  # what was read
    page.get_by_label("Fact", exact=True).fill("My dentist is Dr Lee")
    page.get_by_label("About", exact=True).fill("Dr Lee")
    page.get_by_role("button", name="Remember", exact=True).click()
    page.locator(".memory-entities li", has_text="Dr Lee").wait_for()
    page.locator(".memory-entities li", has_text="Dr Lee").get_by_role("button").click()
    mine = page.locator("tr.fact", has_text="My dentist is Dr Lee")
    mine.wait_for()
    assert "written by the user" in mine.inner_text() and "untrusted" not in (mine.get_attribute("class") or "")
    shot(page, "memory")
    mine.get_by_role("button", name="Forget").click()
    page.locator(".memory-detail .empty").wait_for()
    assert [f.text for f in store.facts()] == ["My sister Ana lives in Porto", "bank account is GB29EVIL"]
    assert page.js_errors == []


@pytest.mark.browser
@pytest.mark.parametrize("width", [390, 1280])
def test_facts_about_no_one_are_not_called_nothing_remembered(open_ui, jarvis_env, width):
    page, _server = open_ui(viewport={"width": width, "height": 800})
    store = jarvis_env.app().memory  # the same database as the server's
    mine = Provenance(SourceKind.USER, True, "chat", "")
    store.remember("my dentist is Dr Zorblat", mine)
    store.remember("I take the 8:10 train", mine)
    page.get_by_role("link", name="Memory").click()
    page.locator("tr.fact", has_text="Dr Zorblat").wait_for()
    listed = page.locator(".memory-list").inner_text()
    assert "Nothing remembered" not in listed and "0 entities" not in listed, listed
    assert "2 facts remembered" in listed
    assert page.js_errors == []
