"""The typed tool contract (integrations/base.ToolMeta): every tool of the default catalog carries one, a tool's
output is outside content unless it says why not, and the catalog refuses a tool that breaks the contract.

TRUSTED is the reviewed list of the tools whose output Jarvis treats as the user's own (or its own): a result
that is not there taints the thread and vouches for no argument (tools/provenance.py). A new tool that declares
trusted output fails this test until someone reviews its reason and adds it here.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import StructuredTool
from pydantic import BaseModel

from integrations.apple_tools import WRAPPERS
from integrations.base import ToolContractError, ToolMeta, make_tool, set_tool_meta, tool_meta, with_meta

TRUSTED = {
    "time_now": "the clock of this machine",
    "fs_write_text": "the path and size of what this call wrote",
    "messages_send": "the id, channel and recipient of the message this call sent",
    "jorb_create": "the id and status of the jorb this call created",
    "reminder_create": "the reminder as stored from this call's own arguments",
    "reminder_list": "the user's own reminders",
    "reminder_cancel": "the user's own reminder it cancelled",
    "gcal_free_slots": "free slots Jarvis computes from the calendar's busy times (no event's text)",
    "gcal_create_event": "the event as the calendar saved it from this call's own arguments",
    "gmail_send_draft": "Gmail's ids for the message it sent",
    "memory_remember": "the fact as the user gave it (one drawn from content comes back FromOutside)",
    "memory_update": "the fact as the user gave it (one drawn from content comes back FromOutside)",
    "memory_forget": "the fact forgotten, the user's (one drawn from content comes back FromOutside)",
    "find_tools": ("the names and descriptions of Jarvis's tools: what the model is given as its tool list "
                   "anyway"),
    "create_new_tool": "never run: graph.route hands its calls to JARB",
}

# The macOS wrappers (integrations/apple_tools.py) exist only with a Macuse server: none of them is trusted (what
# the server answers is its own text; tests/test_outside_text.py drives them over a fake Macuse).
TRUSTED_APPLE: dict[str, str] = {}


def _default_tools(jarvis_env: Any) -> dict[str, Any]:
    rt = jarvis_env.app().runtime
    tools = {t.name: t for t in rt.catalog.all()}
    tools.update({t.name: t for t in rt.meta_tools})
    assert not rt.catalog.refused, rt.catalog.refused
    return tools


def test_every_trusted_output_of_the_default_catalog_is_reviewed(jarvis_env):
    tools = _default_tools(jarvis_env)
    assert {"fs_read_text", "gmail_get_thread", "jorb_list", "memory_search"} <= set(tools)  # the catalog is whole
    trusted = {name: tool_meta(t).trusted_output for name, t in tools.items() if tool_meta(t).trusted_output}
    assert trusted == TRUSTED
    apple = {name: getattr(spec, "trusted_output", "") for name, spec in WRAPPERS.items()
             if getattr(spec, "trusted_output", "")}
    assert apple == TRUSTED_APPLE


def test_a_jorb_listing_is_outside_content(jarvis_env):
    """jorb_list shows what counterparts wrote (a pause reason, who it waits for): it is not the user's words."""
    tools = _default_tools(jarvis_env)
    assert tool_meta(tools["jorb_list"]).untrusted_output


def test_a_tool_that_says_nothing_has_untrusted_output():
    class Args(BaseModel):
        text: str

    def echo(text: str) -> str:
        """Echo."""
        return text

    assert tool_meta(make_tool(echo, args_schema=Args)).untrusted_output
    assert ToolMeta().untrusted_output and not ToolMeta(trusted_output="mine").untrusted_output


def _raw(name: str) -> StructuredTool:
    return StructuredTool.from_function(func=lambda: "done", name=name, description=name)


def test_the_contract_refuses_unknown_fields_and_wrong_types():
    with pytest.raises(ToolContractError, match="untrusted"):
        set_tool_meta(_raw("a"), untrusted_output=False)  # the old open default cannot be spelled
    with pytest.raises(ToolContractError, match="side_effects"):
        set_tool_meta(_raw("b"), side_effects="fs_write")
    with pytest.raises(ToolContractError, match="trusted_output"):
        set_tool_meta(_raw("c"), trusted_output=True)
    tool = set_tool_meta(_raw("d"), side_effects=["fs_write"])
    assert with_meta(tool, editable=False) is tool and tool_meta(tool).side_effects == ("fs_write",)
    assert tool_meta(tool).editable is False


def test_the_catalog_refuses_a_tool_outside_the_contract(jarvis_env):
    """A provider's tool without a ToolMeta, or with a metadata key the contract does not know, is not added: a
    call to it is refused with the reason, and the other tools keep working."""
    from orchestrator.tools.catalog import StaticProvider, ToolCatalog
    from orchestrator.tools.executor import CallContext, ToolExecutor

    bare = _raw("bare")
    extra = set_tool_meta(_raw("extra"), trusted_output="test")
    extra.metadata = {**extra.metadata, "untrusted_output": False}
    good = set_tool_meta(_raw("good"), trusted_output="test")
    catalog = ToolCatalog([StaticProvider("p", [bare, extra, good])])
    assert catalog.names() == ["good"]
    assert catalog.get("bare") is None and catalog.get("extra") is None
    assert "declares no ToolMeta" in catalog.refused["bare"]
    assert "untrusted_output" in catalog.refused["extra"]
    executor = ToolExecutor(jarvis_env.settings, catalog)
    outcome = executor.execute("extra", {}, CallContext("t", "k1"), lambda _r: "approve")
    assert not outcome.ok and "outside its ToolMeta" in outcome.content
    assert executor.execute("good", {}, CallContext("t", "k2"), lambda _r: "approve").content == "done"
