"""Compact tool schemas (llm/tool_schema.py): what a model is sent of a tool, checked on Jarvis's real tools."""

from __future__ import annotations

import json

import jsonschema
from langchain_core.utils.function_calling import convert_to_openai_tool

from orchestrator.chat.planner import openai_schema
from orchestrator.llm.tool_schema import compact_description, compact_tool


def _by_name(jarvis_env) -> dict:
    return {t.name: t for t in jarvis_env.app().static_tools()}


def test_descriptions_keep_the_first_sentence_and_the_ones_that_name_another_tool():
    text = ("Search Gmail with Gmail's query syntax (from:, to:, ...). Returns\n        messages with id and "
            "snippet; read one with gmail_get_thread. Works on long threads.")
    assert compact_description(text, {"query"}) == ("Search Gmail with Gmail's query syntax (from:, to:, ...). "
                                                    "Returns messages with id and snippet; read one with gmail_get_thread.")
    # an abbreviation is not the end of a sentence
    assert compact_description("Cites pages as (p. N). More for people.", set()) == "Cites pages as (p. N)."
    assert compact_description("Find files, e.g. Reports. Then more.", set()) == "Find files, e.g. Reports."
    # naming one of the tool's own arguments is not a reason to keep a sentence (the argument says it)
    assert compact_description("Summarize. Set max_words to cap it.", {"max_words"}) == "Summarize."


def test_optional_arguments_lose_null_and_defaults_but_keep_types_bounds_and_enums(jarvis_env):
    tools = _by_name(jarvis_env)
    full = convert_to_openai_tool(tools["reminder_list"])["function"]["parameters"]["properties"]
    assert full["status"]["anyOf"][-1] == {"type": "null"} and full["limit"]["default"] == 50
    props = openai_schema(tools["reminder_list"])["function"]["parameters"]["properties"]
    assert props["status"] == {"enum": ["pending", "sent", "failed", "cancelled", "skipped", "missed"],
                               "type": "string", "description": "only reminders with this status"}
    assert props["limit"] == {"maximum": 500, "minimum": 1, "type": "integer"}
    # a union of two real types stays a union (only the null goes)
    pages = openai_schema(tools["pdf_extract_text"])["function"]["parameters"]["properties"]["pages"]
    assert pages["anyOf"] == [{"type": "string"}, {"items": {"type": "integer"}, "type": "array"}]


def test_argument_descriptions_go_only_where_they_repeat_the_names(jarvis_env):
    tools = _by_name(jarvis_env)
    draft = openai_schema(tools["gmail_draft_reply"])["function"]["parameters"]
    assert "description" not in draft["properties"]["thread_id"]  # "the thread to reply to"
    assert draft["properties"]["body_md"]["description"].startswith("the reply, in Markdown")
    thread = openai_schema(tools["gmail_get_thread"])["function"]["parameters"]["properties"]["thread_id"]
    assert thread["description"] == "the thread id from gmail_search"  # says where the value comes from
    when = openai_schema(tools["reminder_create"])["function"]["parameters"]["properties"]["when"]
    assert when["description"] == "the time in the user's words ('tomorrow at 9am') or ISO 8601"  # after ";": a detail


def test_every_tool_stays_callable_and_its_compact_schema_accepts_what_the_full_one_requires(jarvis_env):
    for tool in jarvis_env.app().static_tools():
        full = convert_to_openai_tool(tool)["function"]
        small = openai_schema(tool)["function"]
        assert small["name"] == full["name"] and small["description"], tool.name
        assert small["parameters"].get("required", []) == full["parameters"].get("required", []), tool.name
        assert set(small["parameters"]["properties"]) == set(full["parameters"]["properties"]), tool.name
        jsonschema.Draft202012Validator.check_schema(small["parameters"])
        assert len(json.dumps(small)) < len(json.dumps(full)) or full == small, tool.name
        assert "\\n" not in json.dumps(small) and "  " not in json.dumps(small), tool.name  # no docstring layout


def test_a_schema_that_is_not_a_function_tool_passes_unchanged():
    odd = {"type": "web_search"}
    assert compact_tool(odd) == odd
    assert compact_tool({"type": "function", "function": {"name": "x"}}) == {"type": "function", "function": {"name": "x"}}
