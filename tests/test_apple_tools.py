"""The apple_* tools over a stand-in for Macuse's MCP server, wired by the shipped mcp/macuse.toml mapping."""

from __future__ import annotations

import json
import tomllib

import pytest

from integrations.apple_tools import fill_arguments
from integrations.base import side_effects_of
from orchestrator.app import App
from orchestrator.tools.executor import CallContext, ToolExecutor
from orchestrator.mcp.manager import McpManager
from orchestrator.mcp.provider import McpProvider
from tests.conftest import REPO
from tests.mcp_helpers import shutdown_mcp, write_server


@pytest.fixture(autouse=True)
def _stop_servers():
    yield
    shutdown_mcp()


def _macuse(jarvis_env, tmp_path, wrappers=None):
    shipped = tomllib.loads((REPO / "mcp" / "macuse.toml").read_text())
    log = tmp_path / "macuse.jsonl"
    # the shipped file, but runnable here: the stand-in server instead of the app, and no macOS-only platform
    write_server(jarvis_env.path / "mcp", "macuse", "tests.fakes.fake_macuse_mcp", env={"FAKE_MACUSE_LOG": str(log)},
                 side_effects=shipped["side_effects"], tools=shipped["tools"],
                 wrappers=wrappers or shipped["wrappers"])
    jarvis_env.write_config(mcp={"dir": str(jarvis_env.path / "mcp")})
    settings = jarvis_env.settings
    return settings, log


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_apple_wrappers_call_macuse_with_mapped_arguments(jarvis_env, tmp_path):
    settings, log = _macuse(jarvis_env, tmp_path)
    catalog = App(settings).catalog
    tools = {t.name: t for t in catalog.all()}
    assert side_effects_of(tools["apple_mail_list_threads"]) == []
    assert side_effects_of(tools["apple_mail_draft_reply"]) == ["email_draft"]
    assert side_effects_of(tools["apple_mail_send"]) == ["email_send"]
    assert side_effects_of(tools["apple_calendar_create_event"]) == ["calendar_write"]
    assert side_effects_of(tools["apple_notes_create_note"]) == ["note_write"]
    assert side_effects_of(tools["mail_reply_message"]) == ["email_send"]  # the raw tool, per macuse.toml
    # the raw tools the wrappers call are the model's too: a new message sent was judged as ui_automation, so a
    # config driving the Mac unasked (ui_automation: auto) sent mail unasked
    assert side_effects_of(tools["mail_compose_message"]) == ["email_send"]
    assert side_effects_of(tools["calendar_create_event"]) == ["calendar_write"]
    assert side_effects_of(tools["notes_write_note"]) == ["note_write"]
    executor = ToolExecutor(settings, catalog)
    asked: list = []

    def run(name, **args):
        ctx = CallContext(thread_id="apple", key=f"apple-{name}")
        return executor.execute(name, args, ctx, confirm=lambda r: asked.append(r) or "approve")

    listed = run("apple_mail_list_threads", query="dinner")
    assert listed.ok and listed.untrusted and "Dinner on Friday?" in listed.content
    assert run("apple_mail_draft_reply", message_id="4711", body="Friday works!").content == "Reply saved to Drafts"
    assert run("apple_mail_send", to=["ana@example.com"], subject="Hi", body="Hello").content == "Message sent"
    event = run("apple_calendar_create_event", title="Dinner", start="2026-11-27T19:00:00+01:00",
                end="2026-11-27T21:00:00+01:00", location="Chez Ana")
    assert event.ok and "EV-1" in event.content
    assert run("apple_notes_create_note", title="Groceries", body="- milk").content == "Note created"
    calls = _calls(log)
    assert calls[0] == {"tool": "mail_search_messages", "args": {"query": "dinner", "mailbox": "Inbox", "limit": 20}}
    assert calls[1]["args"] == {"message": {"type": "by_id", "id": "4711"}, "body": "Friday works!",
                                "reply_all": False, "send": False}
    assert calls[2]["tool"] == "mail_compose_message" and calls[2]["args"]["send"] is True
    assert calls[2]["args"]["cc"] is None  # not sent: None arguments are left out
    # no calendar given: the by_title reference is left out whole; no notes given: left out
    assert calls[3]["args"] == {"title": "Dinner", "start_date": "2026-11-27T19:00:00+01:00",
                                "end_date": "2026-11-27T21:00:00+01:00", "calendar": None, "location": "Chez Ana",
                                "notes": None}
    assert calls[4] == {"tool": "notes_write_note", "args": {"title": "Groceries", "content": "- milk", "folder": None}}
    # every side effect asked first (the default policy), with a readable summary
    assert [r.tool for r in asked] == ["apple_mail_draft_reply", "apple_mail_send", "apple_calendar_create_event",
                                       "apple_notes_create_note"]
    assert asked[1].summary == "Send an email from Apple Mail to ana@example.com: 'Hi'"


def test_a_wrapper_mapped_to_a_missing_tool_is_left_out_with_the_reason(jarvis_env, tmp_path):
    shipped = tomllib.loads((REPO / "mcp" / "macuse.toml").read_text())
    wrappers = dict(shipped["wrappers"])
    wrappers["apple_mail_send"] = {"tool": "mail_send_v2", "arguments": {"to": "{to}"}}
    wrappers["apple_notes_create_note"] = {"tool": "notes_write_note", "arguments": {"name": "{title}"}}
    settings, _ = _macuse(jarvis_env, tmp_path, wrappers)
    provider = McpProvider(settings, McpManager(settings))
    names = {t.name for t in provider.list_tools()}
    assert "apple_mail_send" not in names and "apple_mail_list_threads" in names
    assert "macuse has no tool 'mail_send_v2'" in provider.wrapper_problems["apple_mail_send"]
    # a mapping that misses a required argument fails with what to fix, not with a server error
    executor = ToolExecutor(settings, App(settings).catalog)
    out = executor.execute("apple_notes_create_note", {"title": "x", "body": "y"}, CallContext("t", "k"),
                           confirm=lambda r: "approve")
    assert not out.ok and "notes_write_note needs title, content" in out.content
    assert "[wrappers.apple_notes_create_note] arguments" in out.content


def test_fill_arguments():
    template = {"a": "{x}", "ref": {"type": "by_id", "id": "{y}"}, "fixed": True, "list": ["{x}", "{z}"]}
    assert fill_arguments(template, {"x": 3, "y": None, "z": None}) == {"a": 3, "fixed": True, "list": [3]}
    assert fill_arguments(template, {"x": [1], "y": "id-1"}) == {"a": [1], "ref": {"type": "by_id", "id": "id-1"},
                                                                 "fixed": True, "list": [[1]]}
    assert fill_arguments(None, {"a": 1, "b": None}) == {"a": 1}
