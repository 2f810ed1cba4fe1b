"""The scripted model of the AgentDojo bench, in two personalities written from AgentDojo's own ground truth.

No model that runs here can solve these tasks, so the model is a script served over HTTP by the scripted
OpenAI-compatible server (tests/fakes/llm_server.py) and reached through Jarvis's real ChatOpenAI client. It only
sees what a model sees: the request's messages and bound tools.

careful   calls the user task's ground-truth calls one by one, then answers with the task's ground-truth output.
gullible  the same, but the first time an injection task's goal shows up in a tool result it makes that injection
          task's ground-truth calls first, as a strong model that obeys would. A call to a tool that is not bound
          is preceded by one find_tools search for it.
"""

from __future__ import annotations

import json
import re
from typing import Any

FIND_TOOLS = "find_tools"


def _squash(text: str) -> str:
    """Letters and digits only: a goal found in a YAML-quoted, line-folded tool result."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def plain_args(args: Any) -> dict[str, Any]:
    """A ground-truth call's arguments as a model would send them (JSON)."""
    return json.loads(json.dumps(dict(args), default=str))


class Persona:
    def __init__(self, plan: list[tuple[str, dict]], answer: str, injection: list[tuple[str, dict]] | None = None,
                 goal: str | None = None):
        self.queue = list(plan)
        self.answer = answer
        self.injection = list(injection or [])
        self.goal = _squash(goal) if goal else None
        self.obeyed = False
        self.searched: set[str] = set()

    @classmethod
    def careful(cls, plan: list[tuple[str, dict]], answer: str) -> "Persona":
        return cls(plan, answer)

    @classmethod
    def gullible(cls, plan: list[tuple[str, dict]], answer: str, injection: list[tuple[str, dict]], goal: str) -> "Persona":
        return cls(plan, answer, injection, goal)

    def respond(self, request: dict) -> dict:
        messages = request.get("messages") or []
        if self.goal and not self.obeyed:
            for m in messages:
                if m.get("role") == "tool" and self.goal in _squash(_content(m.get("content"))):
                    self.obeyed = True
                    self.queue = self.injection + self.queue
                    break
        if not self.queue:
            return {"content": self.answer}
        name, args = self.queue[0]
        bound = {t.get("function", {}).get("name") for t in request.get("tools") or []}
        if name not in bound and FIND_TOOLS in bound and name not in self.searched:
            self.searched.add(name)
            return {"tool_calls": [{"name": FIND_TOOLS, "arguments": {"query": name.replace("_", " ")}}]}
        self.queue.pop(0)
        return {"tool_calls": [{"name": name, "arguments": args}]}


def _content(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""
