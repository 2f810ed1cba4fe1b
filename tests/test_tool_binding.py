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
    names = {t.name for t in jarvis_env.app().catalog.offered()} - {"find_tools"}  # Google's wait for a sign-in
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


def test_the_catalog_view_is_made_again_exactly_when_a_tool_changes(jarvis_env, monkeypatch):
    """ToolCatalog.view() is kept while every provider gives the very same tools (the planner derives its lookups
    from it once: chat/runtime.PlannerTools). A new or rebuilt tool, a tool disabled, a provider that fails or
    recovers, or a provider's own list changed in place each give a new view with what changed."""
    from orchestrator.tools.switches import ToolSwitches

    tools = App(jarvis_env.settings).static_tools()
    first, second = tools[:3], tools[3:6]
    shared = list(first)
    flaky = {"fail": False}

    class Changing:
        name = "changing"

        def __init__(self):
            self.tools = list(second)

        def list_tools(self):
            if flaky["fail"]:
                raise RuntimeError("server down")
            return list(self.tools)  # a new list each time, as the MCP and generated-tool providers give

    changing = Changing()
    catalog = ToolCatalog([StaticProvider("static", []), changing],
                          switches=ToolSwitches(jarvis_env.settings))
    catalog.providers[0]._tools = shared
    view = catalog.view()
    assert catalog.view() is view and [t.name for t in view.tools] == [t.name for t in first + second]

    changing.tools = list(second[:2])  # a tool gone
    gone = catalog.view()
    assert gone is not view and second[2].name not in gone.by_name
    changing.tools = list(second[:2]) + [second[2].model_copy()]  # rebuilt: the same name, another object
    rebuilt = catalog.view()
    assert rebuilt is not gone and rebuilt.by_name[second[2].name] is changing.tools[2]
    assert catalog.view() is rebuilt

    shared.append(tools[6])  # a provider's own list changed in place
    grown = catalog.view()
    assert grown is not rebuilt and tools[6].name in grown.by_name

    flaky["fail"] = True  # the changing provider fails: its tools are left out, the static ones stay
    down = catalog.view()
    assert down is not grown and list(down.by_name) == [t.name for t in first] + [tools[6].name]
    flaky["fail"] = False
    assert second[0].name in catalog.view().by_name

    ToolSwitches(jarvis_env.settings).disable(first[0].name)
    monkeypatch.setattr("orchestrator.tools.switches.CACHE_S", 0.0)  # the switches are read again at once
    assert first[0].name not in catalog.view().by_name and first[0].name not in catalog.names()


def test_thread_tools_with_positions_binds_what_a_pass_over_the_catalog_bound():
    """thread_tools looks names up by their place in the catalog instead of going through all of it: the same
    choice as the pass over the catalog it replaced, for bound tools kept, new ones, ones not in the catalog, and
    the start again when the cap or the window is passed."""
    import random

    from langchain_core.tools import StructuredTool

    from integrations.base import set_tool_meta

    from orchestrator.chat.tool_binding import fit, thread_tools

    def reference(others, chosen, bound_before, cap, fits):  # the pass over the catalog, as it was
        bound = dict.fromkeys(bound_before)
        picked = {t.name for t in chosen}
        found, new = {}, []
        for t in others:
            if t.name in bound:
                found[t.name] = t
            elif t.name in picked:
                new.append(t)
        kept = [found[n] for n in bound if n in found]
        listed = {t.name for t in new}
        new += [t for t in chosen if t.name not in found and t.name not in listed]
        merged = kept + new
        if len(merged) <= cap and fits(merged):
            return merged
        fresh = {t.name for t in fit(list(chosen)[:cap], fits)}
        return [t for t in others if t.name in fresh]

    def tool(name):
        return set_tool_meta(StructuredTool.from_function(func=lambda: name, name=name, description=name))

    pool = [tool(f"t{i}") for i in range(60)]
    outside = [tool(f"gone{i}") for i in range(5)]  # bound or chosen, no longer in the catalog
    rng = random.Random(25)
    for _ in range(400):
        others = rng.sample(pool, rng.randint(0, 40))
        position = {t.name: i for i, t in enumerate(others)}
        chosen = rng.sample(others + outside, rng.randint(0, min(12, len(others) + 5)))
        bound_before = [t.name for t in rng.sample(pool + outside, rng.randint(0, 15))]
        cap, room = rng.randint(1, 20), rng.randint(0, 20)

        def fits(tools, room=room):
            return len(tools) <= room

        got = thread_tools(position, others, chosen, bound_before, cap, fits)
        assert [t.name for t in got] == [t.name for t in reference(others, chosen, bound_before, cap, fits)]
