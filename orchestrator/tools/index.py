"""Choosing which tools the planner sees, when there are more than `planner.max_bound_tools`.

A catalog index (SQLite FTS5, porter-stemmed, over each tool's name, description, argument names and
descriptions, and examples) ranks the tools for the turn's request with BM25; where `models.embeddings` is
configured, the tools' vectors rank them too and the two rankings are fused (reciprocal rank fusion). Tools the
thread used recently stay bound, and the planner always has `find_tools(query)` to ask for more, so a tool
that the ranking missed is one call away. Binding a dozen schemas instead of a thousand keeps the prompt (and
its cost) flat however many tools Jarvis has built.

The index lives in memory and is rebuilt only when the set of tools changes.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from integrations.base import set_tool_meta, tool_meta

from orchestrator.core import json_bounds
from orchestrator.llm.embeddings import Embedder

log = logging.getLogger(__name__)

FIND_TOOLS = "find_tools"
_WORD = re.compile(r"[A-Za-z0-9]+")
_STOP = {"a", "an", "the", "to", "of", "and", "or", "in", "on", "for", "my", "me", "i", "is", "it", "be", "with",
         "please", "can", "you", "what", "this", "that", "do", "from", "at", "by", "as", "are", "was", "all",
         # greetings and thanks name no tool; matched as prefixes ("say" finds "says"), they bound tools that
         # stayed in the thread: "Say hello." got memory_remember, pdf_extract_text and jorb_create
         "say", "hello", "hi", "hey", "thanks", "thank", "bye", "goodbye", "ok", "okay", "yes", "no",
         # small talk and question words: "hello, how are you?" bound docs_search and messages_send ("how many
         # passages"), and a small model called them; "that's all for now" bound time_now; "who is my dentist?"
         # bound pdf_summarize and jorb_create
         "how", "who", "whom", "whose", "now", "doing", "fine", "good", "great", "well", "am", "we", "us", "our",
         "does", "did", "have", "has", "had"}
RRF_K = 60


def tool_text(tool: BaseTool) -> dict[str, str]:
    """The searchable fields of a tool."""
    schema = tool.args_schema
    args: list[str] = []
    if isinstance(schema, dict):
        for name, prop in (schema.get("properties") or {}).items():
            args.append(f"{name} {prop.get('description', '')}")
    elif schema is not None and hasattr(schema, "model_fields"):
        for name, field in schema.model_fields.items():
            args.append(f"{name} {field.description or ''}")
    examples = tool_meta(tool).examples
    name_words = tool.name.replace("_", " ").replace("-", " ")
    return {"name": f"{tool.name} {name_words}", "description": tool.description or "",
            "args": " ".join(args).replace("_", " "), "examples": " ".join(map(str, examples))}


def _query_terms(text: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(text or "")]
    return list(dict.fromkeys(w for w in words if w not in _STOP and len(w) > 1))[:40]


class ToolIndex:
    def __init__(self, embed: Any = None):
        self._lock = threading.Lock()
        self._fingerprint: int | None = None
        self._conn: sqlite3.Connection | None = None
        self._names: list[str] = []
        self._embed = embed  # callable(list[str]) -> list[list[float]], or None
        self._vectors: dict[str, list[float]] = {}
        self._embed_failed = False
        self._last_rank: tuple[tuple[Any, str, int], list[str]] | None = None

    @staticmethod
    def fingerprint(tools: list[BaseTool]) -> int:
        """Changes when a tool is added, removed or rebuilt (providers rebuild a tool when it changes)."""
        return hash(tuple(map(id, tools)))  # a renamed or changed tool is a new object

    def _rebuild(self, tools: list[BaseTool]) -> None:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        conn.execute("CREATE VIRTUAL TABLE tools USING fts5(name, description, args, examples, "
                     "tokenize='porter unicode61')")
        rows = []
        for t in tools:
            f = tool_text(t)
            rows.append((f["name"], f["description"], f["args"], f["examples"]))
        conn.executemany("INSERT INTO tools(name, description, args, examples) VALUES (?, ?, ?, ?)", rows)
        self._conn = conn
        self._names = [t.name for t in tools]
        if self._embed is not None and not self._embed_failed:
            missing = [t for t in tools if t.name not in self._vectors]
            if missing:
                try:
                    texts = [" ".join(tool_text(t).values()) for t in missing]
                    for t, vec in zip(missing, self._embed(texts)):
                        self._vectors[t.name] = vec
                except Exception as exc:  # noqa: BLE001 - keyword search alone still works
                    self._embed_failed = True
                    log.warning("tool embeddings unavailable (%s); ranking tools by keywords only", exc)

    def ensure(self, tools: list[BaseTool], fingerprint: int | None = None) -> None:
        """Index `tools` unless they are those indexed (`fingerprint`: theirs, when the caller has it)."""
        fp = self.fingerprint(tools) if fingerprint is None else fingerprint
        with self._lock:
            if fp != self._fingerprint:
                self._rebuild(tools)
                self._fingerprint = fp

    def _keyword_rank(self, query: str, limit: int) -> list[str]:
        terms = _query_terms(query)
        if not terms or self._conn is None:
            return []
        match = " OR ".join(f'"{t}"*' for t in terms)
        with self._lock:
            # Weights: a hit in the name counts most, then description, arguments, examples.
            rows = self._conn.execute(
                "SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, 8.0, 3.0, 1.5, 1.0) LIMIT ?",
                (match, limit)).fetchall()
        return [self._names[r[0] - 1] for r in rows]

    def _vector_rank(self, query: str, limit: int) -> list[str]:
        if self._embed is None or self._embed_failed or not self._vectors or not query.strip():
            return []
        try:
            (q,) = self._embed([query])
        except Exception as exc:  # noqa: BLE001
            self._embed_failed = True
            log.warning("tool embeddings unavailable (%s); ranking tools by keywords only", exc)
            return []
        qn = math.sqrt(sum(x * x for x in q)) or 1.0
        scored = []
        for name, v in self._vectors.items():
            vn = math.sqrt(sum(x * x for x in v)) or 1.0
            scored.append((sum(a * b for a, b in zip(q, v)) / (qn * vn), name))
        scored.sort(reverse=True)
        return [n for _, n in scored[:limit]]

    def rank(self, query: str, limit: int) -> list[str]:
        """Tool names, best first. The last ranking is kept: every planner call of a turn asks the same (the
        turn's request over the same tools), and the search is the part of a turn that grows with the catalog."""
        key = (self._fingerprint, query, limit)
        last = self._last_rank
        if last is not None and last[0] == key:
            return list(last[1])
        ranked = self._rank(query, limit)
        self._last_rank = (key, ranked)
        return list(ranked)

    def _rank(self, query: str, limit: int) -> list[str]:
        keyword = self._keyword_rank(query, max(limit * 3, 30))
        vector = self._vector_rank(query, max(limit * 3, 30))
        if not vector:
            return keyword[:limit]
        scores: dict[str, float] = {}
        for ranking in (keyword, vector):
            for i, name in enumerate(ranking):
                scores[name] = scores.get(name, 0.0) + 1.0 / (RRF_K + i + 1)
        return [n for n, _ in sorted(scores.items(), key=lambda kv: -kv[1])][:limit]


@dataclass(frozen=True)
class ToolSearch:
    """A list of tools as select_tools takes it, when the caller keeps it from step to step (chat/runtime.py): its
    fingerprint (ToolIndex.fingerprint) and its tools by name."""

    fingerprint: int
    by_name: dict[str, BaseTool]


def select_tools(index: ToolIndex, tools: list[BaseTool], query: str, recent: list[str], limit: int,
                 known: ToolSearch | None = None) -> list[BaseTool]:
    """At most `limit` tools: the recently used ones (newest first, up to a third), then the best ranked. `known`:
    `tools`' fingerprint and names, when the caller has them."""
    if len(tools) <= limit:
        return list(tools)
    index.ensure(tools, known.fingerprint if known is not None else None)
    by_name = known.by_name if known is not None else {t.name: t for t in tools}
    chosen: list[str] = []
    for name in reversed(recent):
        if name in by_name and name not in chosen and len(chosen) < max(1, limit // 3):
            chosen.append(name)
    for name in index.rank(query, limit * 2):
        if len(chosen) >= limit:
            break
        if name not in chosen:
            chosen.append(name)
    return [by_name[n] for n in chosen]


class FindToolsArgs(BaseModel):
    query: str = Field(description="what the tool should do, in a few words (e.g. 'convert currency', 'send sms')")
    limit: int = Field(8, ge=1, le=25, description="how many tools to return")


def find_tools_tool(index: ToolIndex, all_tools: Any) -> StructuredTool:
    """The planner's way to reach a tool it was not given: found tools are bound for its next step."""

    def find_tools(query: str, limit: int = 8) -> list[dict[str, Any]]:
        tools = [t for t in all_tools() if t.name != FIND_TOOLS]
        index.ensure(tools)
        by_name = {t.name: t for t in tools}
        found = []
        for name in index.rank(query, limit):
            t = by_name[name]
            args = list((t.args or {}).keys())
            found.append({"name": name, "description": (t.description or "")[:300], "args": args})
        return found

    tool = StructuredTool.from_function(
        func=find_tools, name=FIND_TOOLS, args_schema=FindToolsArgs, infer_schema=False,
        description=("Search all of Jarvis's tools (there are more than you were given) by what they do. Every tool "
                     "found is given to you on your next step (as many as fit the model's context window), so you "
                     "can call them right after."))
    set_tool_meta(tool, source="meta", trusted_output=("the names and descriptions of Jarvis's tools: what the "
                                                       "model is given as its tool list anyway"))
    return tool


def tool_embedding(embedder: Embedder) -> Any:
    """A callable embedding texts through `embedder` (the App's one: llm/embeddings.py, the same client, bounds and
    checks as the document index and memory), raising when it gives none; None when no endpoint is configured."""
    cfg = embedder.cfg
    if cfg is None:
        return None

    def embed(texts: list[str]) -> list[list[float]]:
        vectors = embedder.embed(texts)
        if vectors is None:
            raise RuntimeError(f"the embeddings endpoint {cfg.base_url} gave no vectors")
        return [v.tolist() for v in vectors]

    return embed


def found_names(content: str) -> list[str]:
    """Tool names in a find_tools result (for keeping them bound)."""
    try:
        return [item["name"] for item in json_bounds.loads(content) if isinstance(item, dict) and "name" in item]
    except (ValueError, TypeError):
        return []


def found_on_last_step(messages: list[Any]) -> list[str]:
    """The tool names the planner's last step found with find_tools (its results after the latest model message),
    best first: the next step binds them all (chat/runtime.py, chat/tool_binding.first_found)."""
    names: list[str] = []
    for message in reversed(messages):
        if getattr(message, "type", None) != "tool":
            break
        if getattr(message, "name", None) == FIND_TOOLS and getattr(message, "status", "success") != "error":
            names = found_names(str(message.content)) + names
    return list(dict.fromkeys(names))
