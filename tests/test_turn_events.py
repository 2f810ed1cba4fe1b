"""Turn events are typed inside Jarvis and plain dicts on the wire: each kind the UI, SSE, the CLI, the MCP offer
and the channels read converts to its type and back to the very same dict, and a kind (or a shape) no consumer
knows is passed on as it came rather than dropped or guessed."""

from __future__ import annotations

import pytest

from orchestrator.chat.turn_events import (Confirmation, Done, Error, Other, Progress, Stopped, Token, ToolCall,
                                           ToolEnd, ToolStart, from_wire, to_wire)
from orchestrator.server.app import decorate_event

WIRE = [
    ({"event": "token", "text": "Hel"}, Token),
    ({"event": "tool_call", "tool": "web_fetch", "args": {"url": "https://x.example"}, "id": "call-1"}, ToolCall),
    ({"event": "tool_start", "tool": "web_fetch", "args": {"url": "https://x.example"}, "key": "t|1"}, ToolStart),
    ({"event": "tool_end", "tool": "web_fetch", "ok": False, "duration_ms": 12.5, "preview": "404", "key": "t|1"},
     ToolEnd),
    ({"event": "progress", "stage": "run_tests", "attempt": 1, "message": "testing add", "tool": "add", "ok": True},
     Progress),
    ({"event": "confirmation", "interrupt_id": "i-1", "thread_id": "default", "tool": "email_send",
      "args": {"to": "bob@example.com"}, "side_effects": ["send_external"], "ref": "abc"}, Confirmation),
    ({"event": "done", "content": "All set.", "message_id": "m-1"}, Done),
    ({"event": "done", "content": "", "message_id": None}, Done),
    ({"event": "stopped", "content": "Stopped: you stopped this turn.", "message_id": "m-2"}, Stopped),
    ({"event": "error", "message": "the model server is down", "kind": "model_endpoint"}, Error),
]


@pytest.mark.parametrize(("wire", "kind"), WIRE, ids=[w["event"] for w, _ in WIRE])
def test_each_kind_is_typed_and_gives_back_the_same_wire_dict(wire, kind):
    typed = from_wire(wire)
    assert type(typed) is kind
    assert to_wire(typed) == wire and list(to_wire(typed)) == list(wire)


def test_the_typed_fields_are_the_ones_consumers_read():
    error = from_wire({"event": "error", "message": "disk full", "kind": "disk_full"})
    assert isinstance(error, Error) and (error.message, error.failure) == ("disk full", "disk_full")
    progress = from_wire({"event": "progress", "stage": "waiting for the model", "waited_s": 5})
    assert isinstance(progress, Progress) and progress.message == "" and progress.extra == {"waited_s": 5}
    assert to_wire(Done("hi", None)) == {"event": "done", "content": "hi", "message_id": None}


@pytest.mark.parametrize("wire", [{"event": "start", "thread_id": "t"}, {"event": "tool_end", "tool": "x"},
                                  {"event": "token"}, {"event": ""}])
def test_an_unknown_kind_or_a_shape_short_of_its_fields_passes_as_it_came(wire):
    typed = from_wire(wire)
    assert isinstance(typed, Other) and to_wire(typed) == wire


def test_the_server_adds_the_answer_as_html_to_done_only():
    done = decorate_event({"event": "done", "content": "**yes**", "message_id": "m"})
    assert "<strong>yes</strong>" in done["html"] and done["content"] == "**yes**"
    token = {"event": "token", "text": "**yes**"}
    assert decorate_event(token) == token
