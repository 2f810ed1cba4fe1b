"""Effects are judged on what a call will really do ([16] finding 4): the arguments as the tool reads them."""

from __future__ import annotations

import pytest

from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from orchestrator.jorbs.message_tools import build_message_tools
from orchestrator.core.config import settings_from_dict
from orchestrator.tools.executor import CallContext, ToolExecutor


@pytest.fixture
def executor(tmp_path):
    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")},
                                   "autonomy": {"default": "confirm",
                                                "effects": {"message_send": "auto", "email_send": "confirm"}}},
                                  tmp_path)
    return ToolExecutor(settings, ToolCatalog([StaticProvider("messages", build_message_tools(settings))]))


@pytest.mark.parametrize("channel,effects", [
    ("email", ["email_send"]), ("email ", ["email_send"]), (" EMAIL", ["email_send"]),
    ("carrier-pigeon", ["email_send", "message_send"]),  # unknown: the strictest
])
def test_a_send_is_judged_by_the_channel_it_goes_through(executor, channel, effects):
    asked = []

    def confirm(request):
        asked.append(request)
        return {"decision": "deny", "reason": "test"}

    outcome = executor.execute("messages_send", {"channel": channel, "to": "eve@example.org", "text": "the secret"},
                               CallContext(thread_id="t", key=f"k-{channel}"), confirm)
    assert len(asked) == 1, f"{channel!r} was sent without asking: {outcome.content}"
    assert sorted(asked[0].side_effects) == effects and not outcome.ok


def test_a_local_message_stays_automatic(executor):
    outcome = executor.execute("messages_send", {"channel": " Local", "to": "me", "text": "hi"},
                               CallContext(thread_id="t", key="k-local"), lambda r: pytest.fail("asked"))
    assert outcome.ok, outcome.content
