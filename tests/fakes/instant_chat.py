"""An in-process chat model with zero latency, for benchmarks: it calls a tool, then answers.

Given a user message it asks for `tool_name` with `tool_args`; given a tool result it answers with text.
It supports bind_tools (returns itself) so it can stand in for ChatOpenAI in the graph.
"""

from __future__ import annotations

import itertools
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

_ids = itertools.count()


class InstantChatModel(BaseChatModel):
    tool_name: str = "time_now"
    tool_args: dict[str, Any] = {}
    answer: str = "Done."
    responder: Any = None  # callable(messages) -> AIMessage, replacing the tool-then-answer behaviour

    @property
    def _llm_type(self) -> str:
        return "instant"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "InstantChatModel":
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if self.responder is not None:
            return ChatResult(generations=[ChatGeneration(message=self.responder(messages))])
        if isinstance(last, ToolMessage):
            msg = AIMessage(content=self.answer, usage_metadata={"input_tokens": 10, "output_tokens": 2, "total_tokens": 12})
        else:
            msg = AIMessage(content="", tool_calls=[{"name": self.tool_name, "args": dict(self.tool_args),
                                                      "id": f"call_{next(_ids)}", "type": "tool_call"}],
                            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15})
        return ChatResult(generations=[ChatGeneration(message=msg)])
