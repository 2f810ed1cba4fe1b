"""A chat model for processes that never call one."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatResult


class NoModel(BaseChatModel):
    """For processes that only read and write thread state (`jarvis scheduler` alone: posting a reminder never
    calls the model, so none is set up: no API key needed, no built-in model server started)."""

    @property
    def _llm_type(self) -> str:
        return "none"

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise RuntimeError("this process only posts messages to threads; it has no model to call")
