"""What a server's GET /models answer says: the model names it lists, and whether it answers any name at all.

llama.cpp's server and llama-cpp-python's hold one model and answer a request whatever model name it gives;
Ollama, vLLM, LM Studio and OpenAI refuse a name they do not list (HTTP 404), even when they list only one. The
two llama.cpp servers say who they are in `owned_by` ("llamacpp", and llama-cpp-python's "me"), which is what
tells them apart here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ANSWERS_ANY_NAME = frozenset({"llamacpp", "me"})  # owned_by of llama.cpp's server and of llama-cpp-python's


@dataclass(frozen=True)
class ModelList:
    ids: tuple[str, ...]
    answers_any_name: bool

    def serves(self, model: str) -> bool:
        """Whether a chat request for `model` is answered: it is listed (Ollama's ":latest" tag counts), or the
        server holds one model and ignores the name."""
        if model in self.ids or f"{model}:latest" in self.ids:
            return True
        return self.answers_any_name and len(self.ids) == 1


def read_model_list(payload: Any) -> ModelList | None:
    """The listing in a GET /models body, or None when it is not the OpenAI list shape (then nothing can be said)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    entries = [m for m in data if isinstance(m, dict) and m.get("id")]
    ids = tuple(str(m["id"]) for m in entries)
    any_name = bool(entries) and all(m.get("owned_by") in ANSWERS_ANY_NAME for m in entries)
    return ModelList(ids, any_name)
