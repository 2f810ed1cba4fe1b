"""The session's cached output-schema check gives the same answers as the SDK's own check (which it replaces
only for speed): valid results pass, invalid ones and missing structured content raise the SDK's errors, and a
schema replaced by a later tools/list is used from then on."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from mcp import ClientSession
from mcp import types as mt

from orchestrator.mcp.session import ValidatorCachingSession

SCHEMA = {"type": "object", "properties": {"result": {"$ref": "#/$defs/temp"}}, "required": ["result"],
          "$defs": {"temp": {"type": "number", "minimum": -50}}}


def _session(cls):
    send, recv = anyio.create_memory_object_stream(1)
    session = cls(recv, send)
    session._tool_output_schemas = {"temp": SCHEMA, "plain": None}
    return session


def _result(structured):
    return mt.CallToolResult(content=[mt.TextContent(type="text", text="x")], structuredContent=structured)


async def _outcome(cls, name, structured):
    try:
        await _session(cls)._validate_tool_result(name, _result(structured))
        return "ok"
    except RuntimeError as exc:
        return str(exc)


@pytest.mark.parametrize("name, structured", [
    ("temp", {"result": 21.5}),
    ("temp", {"result": -80}),  # breaks the $ref'd minimum
    ("temp", {"result": "warm"}),
    ("temp", {}),
    ("temp", None),  # a schema but no structured content
    ("plain", None),  # no schema: nothing to check
])
def test_same_answers_as_the_sdk(name, structured):
    ours = asyncio.run(_outcome(ValidatorCachingSession, name, structured))
    sdk = asyncio.run(_outcome(ClientSession, name, structured))
    assert ours.split(":")[0] == sdk.split(":")[0], (ours, sdk)
    assert (ours == "ok") == (sdk == "ok")
    if structured == {"result": -80}:
        assert "Invalid structured content returned by tool temp" in ours and "-50" in ours


def test_compiled_once_and_replaced_with_a_new_schema():
    async def run():
        session = _session(ValidatorCachingSession)
        await session._validate_tool_result("temp", _result({"result": 1}))
        first = session._validators["temp"][1]
        await session._validate_tool_result("temp", _result({"result": 2}))
        assert session._validators["temp"][1] is first
        session._tool_output_schemas = {"temp": {"type": "object", "properties": {"result": {"type": "string"}}}}
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await session._validate_tool_result("temp", _result({"result": 2}))
        await session._validate_tool_result("temp", _result({"result": "two"}))

    asyncio.run(run())


def test_a_broken_schema_is_named():
    async def run():
        session = _session(ValidatorCachingSession)
        session._tool_output_schemas = {"bad": {"type": "no-such-type"}}
        with pytest.raises(RuntimeError, match="Invalid schema for tool bad"):
            await session._validate_tool_result("bad", _result({"result": 1}))

    asyncio.run(run())


def test_a_crash_message_quotes_only_this_runs_stderr(tmp_path):
    """[17] finding 11: crash messages repeated stderr lines from earlier runs of the same server."""
    from orchestrator.mcp.manager import stderr_tail

    log = tmp_path / "notes.log"
    log.write_text("--- earlier run\nTraceback of a crash last week\nOLD ERROR\n"
                   "--- 2026-11-24 starting notes\n", encoding="utf-8")
    offset = log.stat().st_size  # where the manager starts this run's stderr
    with log.open("a", encoding="utf-8") as fh:
        fh.write("new problem: port in use\n")
    tail = stderr_tail(log, offset)
    assert "new problem: port in use" in tail and "OLD ERROR" not in tail
    assert "OLD ERROR" in stderr_tail(log, 0)  # what it quoted before
