"""Threads taken from a file (`jarvis threads import`, reading `jarvis export`'s threads.json): as untrusted as
`jarvis memory import` keeps facts and `jarvis reminders import` keeps reminders. A file can say anything, so:

- each thread lands in a new thread of its own (never appended to one that exists: its id gets a suffix then),
  tainted from its first turn on (`untrusted_turn` 1): a later effect asks first, until the user runs `jarvis threads
  trust` on it, as for a thread that read a web page;
- the user's messages in it are marked as words from outside (`provenance.outside_words`): the planner reads
  them, but no value in them counts as the user's for argument provenance;
- tool calls and their results come back as text inside Jarvis's messages, never as a tool's result: a file
  cannot make a value look like one a trusted tool returned.

A file that is not an export of this format (`export.FORMAT`), or that holds something other than threads of
messages, is refused whole with a sentence saying why; nothing is written before the whole file was checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from orchestrator.tools.provenance import outside_words

from .export import FORMAT

MAX_BYTES = 50_000_000  # an export of this size is ~100,000 messages; a larger file is not one to read whole
TYPES = ("human", "ai", "tool")
IMPORTED_SOURCE = "import"


class ImportRefused(ValueError):
    """The file is not a threads export Jarvis can take: nothing was imported."""


@dataclass
class ThreadToImport:
    thread_id: str
    title: str
    messages: list[BaseMessage] = field(default_factory=list)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _message(m: Any, where: str, who: str) -> BaseMessage:
    if not isinstance(m, dict) or m.get("type") not in TYPES or not isinstance(m.get("content", ""), str):
        raise ImportRefused(f"{where} is not a message as `jarvis export` writes one (a type among "
                            f"{', '.join(TYPES)} and a text content)")
    content = m.get("content") or ""
    meta = {"source": IMPORTED_SOURCE, "from": who}
    if m["type"] == "human":
        return outside_words(content, who)
    if m["type"] == "tool":
        status = " (failed)" if m.get("status") == "error" else ""
        return AIMessage(content=f"[tool {_text(m.get('name') or '?')}{status} returned]\n{content}",
                         response_metadata=meta)
    calls = m.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
        raise ImportRefused(f"{where} has tool calls that are not a list of calls")
    called = "".join(f"\n[called {_text(c.get('name'))} with {_text(c.get('args'))}]" for c in calls)
    return AIMessage(content=content + called, response_metadata=meta)


def parse(data: Any, who: str) -> list[ThreadToImport]:
    """The threads of an exported file, checked whole (ImportRefused says why a file is not one)."""
    if not isinstance(data, dict) or not isinstance(data.get("threads"), list):
        raise ImportRefused("not a threads file: expected {\"format\": \"" + FORMAT + "\", \"threads\": [...]} as "
                            "`jarvis export` writes")
    if data.get("format") != FORMAT:
        raise ImportRefused(f"the file is in format {str(data.get('format'))[:40]!r}, and this Jarvis reads "
                            f"{FORMAT!r} (a newer Jarvis's export, or another tool's file)")
    found = []
    for n, t in enumerate(data["threads"]):
        if not isinstance(t, dict) or not isinstance(t.get("thread_id"), str) or not t["thread_id"].strip() \
                or not isinstance(t.get("messages"), list):
            raise ImportRefused(f"thread {n + 1} has no thread_id and messages as `jarvis export` writes them")
        tid = t["thread_id"].strip()[:200]
        title = t["title"] if isinstance(t.get("title"), str) else ""
        found.append(ThreadToImport(tid, title, [_message(m, f"message {i + 1} of thread {tid!r}", who)
                                                 for i, m in enumerate(t["messages"])]))
    return found


def free_id(wanted: str, taken) -> str:
    """`wanted` when no thread has it, else `wanted-imported`, `wanted-imported-2`..."""
    if not taken(wanted):
        return wanted
    n, candidate = 1, f"{wanted}-imported"
    while taken(candidate):
        n += 1
        candidate = f"{wanted}-imported-{n}"
    return candidate


def import_threads(graph: Any, index: Any, data: Any, *, source: str) -> list[tuple[str, str]]:
    """Write each thread of `data` into a new tainted thread of `graph` (the chat graph) listed in `index` (a
    ThreadIndex); returns (id in the file, id given) for each."""
    who = f"the file {source}"
    threads = parse(data, who)

    def taken(tid: str) -> bool:
        if index.get(tid) is not None:
            return True
        return bool(graph.get_state({"configurable": {"thread_id": tid}}).values)

    done = []
    for t in threads:
        tid = free_id(t.thread_id, taken)
        update: dict[str, Any] = {"messages": t.messages, "untrusted_turn": 1}
        graph.update_state({"configurable": {"thread_id": tid}}, update, as_node="respond")
        index.touch(tid, title=f"Imported: {t.title or t.thread_id}"[:200], status="idle")
        done.append((t.thread_id, tid))
    return done
