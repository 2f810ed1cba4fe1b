"""Effects are judged on what a call will really do ([16] finding 4): the arguments as the tool reads them."""

from __future__ import annotations

import pytest

from integrations.base import tool_meta

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


class _NoJorbs:
    """The jorb service's place: these tests judge the call, not the jorb (a created one would start working)."""

    def create(self, *args, **kwargs):
        from orchestrator.jorbs.service import JorbError

        raise JorbError("not started in this test")


@pytest.fixture
def jorb_executor(tmp_path):
    from orchestrator.jorbs.tools import build_jorb_tools

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")},
                                   "autonomy": {"default": "confirm", "effects": {"jorb_create": "auto",
                                                                                 "process_start": "deny"}}}, tmp_path)
    tools = build_jorb_tools(lambda: _NoJorbs(), settings.autonomy)
    return ToolExecutor(settings, ToolCatalog([StaticProvider("jorbs", tools)]))


def test_a_jorb_granted_autonomy_asks_even_where_starting_jorbs_is_automatic(jorb_executor):
    """jorb_create's `autonomy` lets the jorb send, write or start programs without asking for as long as it runs:
    with jorb_create automatic (a user who lets Jarvis start background tasks), a model steered by a mail could
    hand a new jorb `email_send: auto` unasked. Only the user grants autonomy."""
    asked = []

    def deny(request):
        asked.append(request)
        return {"decision": "deny", "reason": "test"}

    args = {"name": "Reply to all", "plan": "mail everyone", "autonomy": {"email_send": "auto", "fs_write": "deny"}}
    outcome = jorb_executor.execute("jorb_create", args, CallContext(thread_id="t", key="k-grant"), deny)
    assert len(asked) == 1 and not outcome.ok
    assert "email_send more freely than your settings do: only you can grant that" in asked[0].reason
    assert "fs_write" not in asked[0].reason  # a deny takes nothing from the user
    plain = jorb_executor.execute("jorb_create", {"name": "Ask Bob", "plan": "ask Bob about Friday"},
                                  CallContext(thread_id="t", key="k-plain"), lambda r: pytest.fail("asked"))
    assert "not started in this test" in plain.content  # automatic: it went on to create the jorb
    tightened = jorb_executor.execute("jorb_create", {"name": "Careful", "plan": "p", "autonomy": {"email_send": "deny"}},
                                      CallContext(thread_id="t", key="k-tight"), lambda r: pytest.fail("asked"))
    assert "not started in this test" in tightened.content
    # `confirm` where the config denies loosens it too: a denied effect would only need a yes (maybe a phone's)
    loosened = jorb_executor.execute("jorb_create", {"name": "Run it", "plan": "p",
                                                     "autonomy": {"process_start": "confirm", "fs_write": "confirm"}},
                                     CallContext(thread_id="t", key="k-loose"), deny)
    assert not loosened.ok and "process_start more freely" in asked[-1].reason and "fs_write" not in asked[-1].reason


# Arguments that choose where an effect goes or what it becomes: a tool taking one is judged per call
# (`side_effects_for`, or `requires_confirmation` as a function of the arguments), or is listed here with why not.
ROUTING_ARGUMENTS = {"url", "webhook_url", "to", "cc", "bcc", "attendees", "recipients", "recipient", "channel",
                     "process_name", "command", "contacts", "autonomy", "host", "endpoint"}
REVIEWED = {
    ("yt_get_transcript", "url"): "only a YouTube video id is taken from it; nothing else is fetched",
    ("yt_summarize", "url"): "only a YouTube video id is taken from it; nothing else is fetched",
    ("jorb_create", "contacts"): "the jorb's own sends are judged per call when it makes them",
}


def test_every_built_in_tool_whose_arguments_route_its_effect_is_judged_per_call(tmp_path):
    """The audit of stop 42 kept: a tool that gains a routing argument (a URL it posts to, a recipient, a program)
    without saying what that argument makes the call do fails here, instead of being judged by its usual effect."""
    from orchestrator.app import App, google_tools

    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}}, tmp_path)
    tools = {t.name: t for t in [*App(settings).static_tools(), *google_tools(settings)]}
    unjudged = []
    for tool in tools.values():
        meta = tool_meta(tool)
        judged = meta.side_effects_for is not None or callable(meta.requires_confirmation)
        for arg in sorted(set(tool.args) & ROUTING_ARGUMENTS):
            if not judged and (tool.name, arg) not in REVIEWED:
                unjudged.append(f"{tool.name}({arg})")
    assert unjudged == [], f"declare side_effects_for (integrations/base.make_tool) or review them: {unjudged}"
    assert {"messages_send", "reminder_create", "gcal_create_event", "jorb_create"} <= set(tools)
    assert not [key for key in REVIEWED if key[0] not in tools], "a reviewed tool is gone: drop its entry"
