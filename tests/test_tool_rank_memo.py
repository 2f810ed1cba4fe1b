"""The tool index keeps its last ranking for the planner calls of one turn; it must never outlive the tools it
ranked (a tool added, removed or rebuilt between two calls is ranked again)."""

from __future__ import annotations

from langchain_core.tools import StructuredTool

from integrations.base import set_tool_meta
from orchestrator.tools.index import ToolIndex


def _tool(name: str, description: str) -> StructuredTool:
    return set_tool_meta(StructuredTool.from_function(func=lambda text="": text, name=name, description=description))


def test_a_ranking_is_reused_only_for_the_same_tools_and_query():
    index = ToolIndex()
    first = [_tool("weather_forecast", "Weather forecast for a city."), _tool("word_count", "Count words.")]
    index.ensure(first)
    assert index.rank("weather in Paris", 5) == ["weather_forecast"]
    assert index.rank("weather in Paris", 5) == ["weather_forecast"]
    assert index.rank("count the words", 5) == ["word_count"]
    # the catalog changed between two calls with the same query: ranked again over the new tools
    second = [_tool("rain_radar", "Weather radar: rain over a city."), *first[1:]]
    index.ensure(second)
    assert index.rank("weather in Paris", 5) == ["rain_radar"]
    # a result handed out is the caller's: changing it does not change the next one
    index.rank("weather in Paris", 5).append("word_count")
    assert index.rank("weather in Paris", 5) == ["rain_radar"]
