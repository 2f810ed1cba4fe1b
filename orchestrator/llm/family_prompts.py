"""What one model family on the built-in backend is told differently from every other model.

Jarvis sends every model the same tool schemas (llm/tool_schema.py) and system text (chat/planner.py). A small model
reads them literally, and words that help one family hurt another: measured with bench/builtin_models.py,
Qwen2.5-Coder-0.5B called fs_list_dir with a folder it made up (/path/to/folder, /projects) for "list the files in
my folder" until the path's description said which folder is the user's, and a small model sent find_tools' example
query ('convert currency') answered with it; SmolLM2-135M without that example did not find the write tool, and
its first run (tests/test_first_run.py) never reached the write's confirmation with the three changes made for all.
So a family's words live here, typed, and its handler (picked from the GGUF's metadata by llm/chat_handlers.py)
rewrites the request by its entry before rendering its prompt (`FamilyPrompt.apply`). A family with no entry
(SmolLM2's ChatML handler) and any model behind an OpenAI-compatible server get what the planner sent, unchanged.
Pure data and dict copies, no llama_cpp: both sides of the embedded server import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class FamilyPrompt:
    """A family's own words: `arguments[(tool, argument)]` replaces that argument's description where the tool is
    given; `system` is added to the end of the system message (one is made when the request has none);
    `named_results`: each tool result begins with the name of the tool that gave it; `after_results`: a system
    message after the request's last messages when they are tool results (at the end, so the prompt's prefix, and
    the server's cache of it, stay as they were, and the choice of a first call is not swayed by it)."""

    arguments: Mapping[tuple[str, str], str] = field(default_factory=lambda: MappingProxyType({}))
    system: str = ""
    named_results: bool = False
    after_results: str = ""

    def tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools as this family is shown them (new dicts where a description changes; the rest as given)."""
        if not self.arguments:
            return tools
        shown = []
        for tool in tools:
            fn = tool.get("function") or {}
            name = str(fn.get("name"))
            properties = (fn.get("parameters") or {}).get("properties") or {}
            changed = {arg: {**spec, "description": self.arguments[(name, arg)]}
                       for arg, spec in properties.items() if isinstance(spec, dict) and (name, arg) in self.arguments}
            if changed:
                params = {**fn["parameters"], "properties": {**properties, **changed}}
                tool = {**tool, "function": {**fn, "parameters": params}}
            shown.append(tool)
        return shown

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages with the results named, `after_results` after them, and `system` added to the first system
        message's text."""
        if self.named_results:
            messages = named_results(messages)
        if self.after_results and messages and messages[-1].get("role") in ("tool", "function"):
            messages = [*messages, {"role": "system", "content": self.after_results}]
        if not self.system:
            return messages
        first = next((i for i, m in enumerate(messages) if m.get("role") == "system"), None)
        if first is None:
            return [{"role": "system", "content": self.system}, *messages]
        content = messages[first].get("content")
        text = content if isinstance(content, str) else "".join(
            str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
        return [*messages[:first], {**messages[first], "content": f"{text}\n\n{self.system}"}, *messages[first + 1:]]

    def apply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return self.messages(messages), self.tools(tools)


def named_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool message's text begins "<tool> returned:", the tool found by its call's id in the assistant message
    that made it. A result the messages do not say the call of is left as it came."""
    calls = {str(c.get("id")): str((c.get("function") or {}).get("name"))
             for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
    named = []
    for m in messages:
        tool = calls.get(str(m.get("tool_call_id"))) if m.get("role") == "tool" else None
        content = m.get("content")
        if tool is not None and isinstance(content, str):
            m = {**m, "content": f"{tool} returned:\n{content}"}
        named.append(m)
    return named


# "'.' for the user's folder" alone: the 1.5B model listed '.projects' and '.notes' for the folders named
_USERS_FOLDER = "relative to the user's folder ('.' is the user's folder itself)"

# Qwen2.5-Coder (llm/qwen_handler.py). Measured on 0.5B with these words as every model's (bench/builtin_models.py's
# docstring): a list of "my folder" with the user's own folder instead of /path/to/folder.
# Its template gives a tool's result back as a user turn in <tool_response>, with no tool named: the 1.5B model
# read "call the bank\nbuy stamps" (a to-do file it had read) as the user asking it to call the bank, and answered
# "I'm sorry, but I can't assist with that." after 12 of the set's 22 requests. With the result named and the line
# after it, it said what four kinds of result showed (a file, a fact remembered, a listing, the time), where it had
# refused three of them. The same line at the end of the system text made it write its first calls as XML prose.
QWEN = FamilyPrompt(after_results="Answer the user's request from the tool's result above, in a sentence or two.",
                    named_results=True, arguments=MappingProxyType({
    ("fs_list_dir", "path"): f"folder to list, {_USERS_FOLDER}",
    ("fs_search", "folder"): f"folder to search recursively, {_USERS_FOLDER}",
    # no example query: a small model sent one used it as its query ("convert currency" for a folder's files)
    ("find_tools", "query"): "what the tool should do, in the user's words",
}))

NONE = FamilyPrompt()
