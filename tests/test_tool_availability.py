"""The tools of an integration that is not connected are not offered to the model (integrations/availability.py,
ToolCatalog.offered): the built-in model, given `gmail_get_thread` with no Google account connected, called it to
answer "hello, who are you?". Through the real chat graph and the scripted model over HTTP: what the planner binds
and what find_tools finds leave them out until Google is connected; then they are offered again."""

from __future__ import annotations

import json

from langchain_core.messages import ToolMessage
from pydantic import BaseModel

from integrations.availability import Availability
from integrations.base import make_tool
from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from tests.conftest import answer, tool_call

GOOGLE_PREFIXES = ("gmail_", "gcal_", "mail_", "calendar_")


def _google(name: str) -> bool:
    return name.startswith(GOOGLE_PREFIXES)


def _turn(env, thread: str, text: str):
    return env.graph().invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": thread}})


def _found(out) -> list[str]:
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "find_tools")
    return [t["name"] for t in json.loads(result.content)]


def _bound(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or ()}


def test_google_tools_are_not_offered_while_google_is_not_connected(jarvis_env):
    jarvis_env.server.push(tool_call("find_tools", query="read a gmail thread, search my email, calendar events"),
                           answer("I am Jarvis, your assistant."))
    out = _turn(jarvis_env, "hello", "hello, who are you?")
    assert out["messages"][-1].content == "I am Jarvis, your assistant."
    first, second = jarvis_env.server.requests
    assert _bound(first) and not {n for n in _bound(first) | _bound(second) if _google(n)}
    found = _found(out)
    assert found and not [n for n in found if _google(n)], found
    # they still exist: the Tools view lists them with the reason (tests/test_server_api.py)
    catalog = jarvis_env.app().catalog
    assert "gmail_get_thread" in catalog.names() and "gmail_get_thread" not in {t.name for t in catalog.offered()}
    assert catalog.view().unavailable["gmail_get_thread"] == "Google is not connected: run `jarvis auth google`"


def test_google_tools_are_offered_once_google_is_connected(jarvis_env, google_server):
    from google.oauth2.credentials import Credentials

    from orchestrator.tools import google_auth

    jarvis_env.write_config(google={"gmail_base_url": google_server.url, "calendar_base_url": google_server.url,
                                    "token_uri": google_server.token_uri})
    google_auth.save_credentials(jarvis_env.settings,
                                 Credentials.from_authorized_user_info(google_server.authorized_user_info()))
    jarvis_env.server.push(tool_call("find_tools", query="read a gmail thread"), answer("Here."))
    out = _turn(jarvis_env, "mail", "read my last gmail thread")
    assert "gmail_get_thread" in _found(out)
    assert {"gmail_get_thread", "gmail_search"} & (_bound(jarvis_env.server.requests[0]) |
                                                   _bound(jarvis_env.server.requests[1]))


class _Args(BaseModel):
    text: str


def _tool(name: str, connected: Availability):
    def run(text: str) -> str:
        """Echo."""
        return text

    return make_tool(run, args_schema=_Args, name=name, unavailable=connected)


def test_a_sign_in_made_while_jarvis_runs_is_offered_within_the_answer_s_time():
    state = {"why": "Service is not connected", "asked": 0}
    now = [0.0]

    def why():
        state["asked"] += 1
        return state["why"]

    connected = Availability(why, ttl_s=2.0, clock=lambda: now[0])
    catalog = ToolCatalog([StaticProvider("s", [_tool("svc_read", connected), _tool("svc_send", connected)]),
                           StaticProvider("t", [_tool("always", Availability(lambda: None))])])
    first = catalog.view()
    assert [t.name for t in catalog.offered()] == ["always"] and catalog.names() == ["svc_read", "svc_send", "always"]
    assert catalog.view() is first and state["asked"] == 1  # one answer for both tools, kept for its time
    state["why"] = None  # signed in
    now[0] = 1.0
    assert [t.name for t in catalog.offered()] == ["always"]  # still the kept answer
    now[0] = 2.5
    assert [t.name for t in catalog.offered()] == ["svc_read", "svc_send", "always"] and state["asked"] == 2


def test_an_answer_that_raises_leaves_the_tools_out():
    def broken():
        raise OSError("the keyring is locked")

    catalog = ToolCatalog([StaticProvider("s", [_tool("svc_read", Availability(broken))])])
    assert catalog.offered() == [] and "the keyring is locked" in catalog.view().unavailable["svc_read"]
