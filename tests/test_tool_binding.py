"""The planner's tools stay the same from turn to turn of a thread and fit the model's window ([25] 1, 3):
chat/tool_binding.py. A server reuses its cached prompt only up to the first token that differs, and the tools come
first, so a tool set that changed with every request made every turn read its prompt again."""

from __future__ import annotations

from orchestrator.app import App
from orchestrator.chat.context_fit import schema_tokens
from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from tests.conftest import answer
from tests.retrieval_catalog import build_catalog

EXTRA = {"find_tools", "create_new_tool"}


def _bound(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def _turns(jarvis_env, graph, thread: str, texts: list[str]) -> list[list[str]]:
    srv = jarvis_env.server
    before = len(srv.requests)
    for text in texts:
        srv.push(answer("ok"))
        graph.invoke({"messages": [("user", text)]}, {"configurable": {"thread_id": thread}})
    return [_bound(r) for r in srv.requests[before:]]


def test_tools_once_bound_in_a_thread_stay_bound_in_their_order(jarvis_env):
    jarvis_env.write_config(models={"primary": {"context_tokens": 65536}})
    catalog = build_catalog(App(jarvis_env.settings).static_tools())  # 1,000 tools: chosen per request
    graph = jarvis_env.graph(catalog=ToolCatalog([StaticProvider("big", catalog)]))
    texts = ["read my notes file", "convert 20 euros to dollars", "what is 1987 in roman numerals?"]
    bound = [[n for n in b if n not in EXTRA] for b in _turns(jarvis_env, graph, "sticky", texts)]
    limit = jarvis_env.settings.planner.max_bound_tools
    assert len(bound[0]) <= limit
    assert "fs_read_text" in bound[0] and "fs_read_text" in bound[2]  # bound for turn 1, still bound in turn 3
    for earlier, later in zip(bound, bound[1:]):
        assert later[:len(earlier)] == earlier  # the same list first, new ones after: the prompt's prefix is kept
    assert len(bound[2]) > len(bound[0])
    # Another thread starts from its own request.
    other = [n for n in _turns(jarvis_env, graph, "other", ["convert 20 euros to dollars"])[0] if n not in EXTRA]
    assert "fs_read_text" not in other


def test_a_thread_that_outgrows_max_thread_tools_starts_again_from_the_request(jarvis_env):
    jarvis_env.write_config(planner={"max_bound_tools": 4, "max_thread_tools": 6},
                            models={"primary": {"context_tokens": 65536}})
    catalog = build_catalog(App(jarvis_env.settings).static_tools())
    graph = jarvis_env.graph(catalog=ToolCatalog([StaticProvider("big", catalog)]))
    texts = ["read my notes file", "convert 20 euros to dollars", "what is 1987 in roman numerals?",
             "send an email to Bob", "list my calendar events"]
    bound = [[n for n in b if n not in EXTRA] for b in _turns(jarvis_env, graph, "capped", texts)]
    assert all(len(b) <= 6 for b in bound)
    assert any(later[:len(earlier)] != earlier for earlier, later in zip(bound, bound[1:]))  # it started again


def test_a_catalog_that_fits_is_bound_whole_and_the_same_every_turn(jarvis_env):
    jarvis_env.write_config(models={"primary": {"context_tokens": 65536}})
    graph = jarvis_env.graph()
    bound = _turns(jarvis_env, graph, "whole", ["what time is it?", "read notes.txt", "thanks"])
    names = {t.name for t in jarvis_env.app().catalog.all()} - {"find_tools"}
    assert len(names) > jarvis_env.settings.planner.max_bound_tools
    assert set(bound[0]) - EXTRA == names and bound[0] == bound[1] == bound[2]


def test_a_small_window_binds_fewer_tools_instead_of_refusing_the_turn(jarvis_env):
    """With a 2,048-token window a dozen tools' schemas leave no room for the conversation: the turn used to be
    refused before the request (context_fit.check_fits). Now fewer tools are bound (at most half the window) and
    find_tools reaches the rest."""
    jarvis_env.write_config(models={"primary": {"context_tokens": 2048}})
    settings = jarvis_env.settings
    catalog = build_catalog(App(settings).static_tools())
    app = jarvis_env.app(catalog=ToolCatalog([StaticProvider("big", catalog)]))
    bound = _turns(jarvis_env, app.graph, "small", ["read my notes file"])[0]
    assert "find_tools" in bound and "fs_read_text" in bound
    assert len(bound) - len(EXTRA & set(bound)) < settings.planner.max_bound_tools
    assert schema_tokens(settings, jarvis_env.server.requests[-1]["tools"]) <= 1024
