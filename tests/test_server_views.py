"""The Reminders view's API and MCP server health in Settings; over real HTTP, with a real MCP server over stdio."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.mcp_helpers import shutdown_mcp, write_server
from tests.ui_server import start_ui, ui_server  # noqa: F401 - fixture


def test_reminders_create_list_cancel(ui_server):
    later = (datetime.now() + timedelta(days=2)).replace(second=0, microsecond=0)
    with ui_server.client() as c:
        empty = c.get("/api/reminders").json()
        assert empty["reminders"] == [] and empty["chat_thread"] == "reminders"
        assert empty["scheduler"]["state"] == "not running"  # this test server starts no background services
        bad = c.post("/api/reminders", json={"title": "x", "when": "soonish"})
        assert bad.status_code == 400 and "is not a time Jarvis can read" in bad.json()["detail"]
        no_target = c.post("/api/reminders", json={"title": "x", "when": later.isoformat(), "target_kind": "webhook"})
        assert no_target.status_code == 400 and "webhook URL" in no_target.json()["detail"]
        no_jorb = c.post("/api/reminders", json={"title": "x", "when": later.isoformat(), "target_kind": "jorb", "target": "zz"})
        assert no_jorb.status_code == 400 and "no jorb 'zz'" in no_jorb.json()["detail"]
        bad_rule = c.post("/api/reminders", json={"title": "x", "when": later.isoformat(), "rrule": "FREQ=SOMETIMES"})
        assert bad_rule.status_code == 400

        made = c.post("/api/reminders", json={"title": "Water the plants", "when": later.strftime("%Y-%m-%dT%H:%M"),
                                              "rrule": "FREQ=DAILY", "priority": "high"})
        assert made.status_code == 201, made.text
        r = made.json()
        assert r["status"] == "pending" and r["target_kind"] == "chat" and r["target"] == "reminders"
        assert r["rrule"] == "FREQ=DAILY" and r["priority"] == "high" and r["created_by"] == "web"
        assert r["due_text"].startswith(later.strftime("%Y-%m-%d %H:%M"))  # the user's local time, as typed
        hook = c.post("/api/reminders", json={"title": "Ping", "when": later.isoformat(), "target_kind": "webhook",
                                              "target": "http://127.0.0.1:9/hook"}).json()
        assert hook["target_kind"] == "webhook" and hook["webhook_url"] == "http://127.0.0.1:9/hook"
        listed = c.get("/api/reminders").json()["reminders"]
        assert [x["title"] for x in listed] == ["Water the plants", "Ping"]

        cancelled = c.post(f"/api/reminders/{r['id']}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        again = c.post(f"/api/reminders/{r['id']}/cancel")
        assert again.status_code == 409 and "already cancelled" in again.json()["detail"]
        assert c.post("/api/reminders/rem_nope/cancel").status_code == 404
        assert [x["id"] for x in c.get("/api/reminders?status=pending").json()["reminders"]] == [hook["id"]]
        assert c.get("/api/reminders?status=bogus").status_code == 400


@pytest.fixture
def mcp_dir(jarvis_env):
    folder = jarvis_env.path / "mcp"
    yield folder
    shutdown_mcp()


def test_mcp_health_in_settings(jarvis_env, mcp_dir):
    with start_ui(jarvis_env) as server, server.client() as c:
        section = next(s for s in c.get("/api/settings/health").json()["sections"] if s["title"] == "MCP servers")
        assert section["items"] == [] and "does not exist" in section["note"] and "jarvis mcp import" in section["note"]
    write_server(mcp_dir, "notes", "tests.fakes.mcp_test_server", "--only", "write_note")
    write_server(mcp_dir, "broken", "tests.fakes.mcp_test_server", "--fail-start")
    write_server(mcp_dir, "off", "tests.fakes.mcp_test_server", enabled=False)
    (mcp_dir / "bad.toml").write_text("command = [not toml")
    with start_ui(jarvis_env) as server, server.client() as c:
        section = next(s for s in c.get("/api/settings/health").json()["sections"] if s["title"] == "MCP servers")
        items = {i["name"]: i for i in section["items"]}
        assert items["notes"]["state"] == "ready" and items["notes"]["ok"] is True and items["notes"]["tools"] == 1
        assert items["broken"]["state"] == "unhealthy" and items["broken"]["ok"] is False
        assert "exited" in items["broken"]["message"] and "restarts it by itself" in items["broken"]["fix"]
        assert items["off"]["state"] == "disabled" and items["off"]["ok"] is None and "enabled = false" in items["off"]["message"]
        assert items["bad"]["state"] == "broken" and items["bad"]["ok"] is False and "Correct" in items["bad"]["fix"]
