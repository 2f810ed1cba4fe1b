"""What a server's GET /models answer says: the model names it lists, and whether it answers any name at all; and
the one bounded GET of a server's small JSON answers (/models, llama.cpp's /props) that every caller uses.

llama.cpp's server and llama-cpp-python's hold one model and answer a request whatever model name it gives;
Ollama, vLLM, LM Studio and OpenAI refuse a name they do not list (HTTP 404), even when they list only one. The
two llama.cpp servers say who they are in `owned_by` ("llamacpp", and llama-cpp-python's "me"), which is what
tells them apart here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from orchestrator.core import json_bounds
from orchestrator.core.owned_transport import owned_client

MAX_BODY = 1 << 20  # a model list, or /props with its chat template: a few KB; more is not one
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


class BodyTooLarge(ValueError):
    """A server's answer to a small GET was larger than MAX_BODY."""


def get_small_json(url: str, api_key: str | None = None, timeout_s: float = 3.0,
                   trust_env: bool = True, server_users: Iterable[int] = ()) -> tuple[int, Any]:
    """(HTTP status, the JSON body, or None when it is not JSON) of a GET whose answer is small by nature: read
    at most MAX_BODY bytes (BodyTooLarge past them), nested at most json_bounds' depth. httpx.HTTPError when
    nothing answers. `trust_env`: the environment's proxy settings apply, as they do to the chat client (False
    for the probes of local ports). A server on this machine must be this user's, or one of `server_users`
    (core/owned_transport: ServerOfAnotherUser, an httpx.ConnectError, before the request is sent)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key and api_key != "none" else {}
    with owned_client(server_users, trust_env=trust_env, timeout=timeout_s) as client, \
            client.stream("GET", url, headers=headers) as resp:
        body = b""
        for chunk in resp.iter_bytes():
            body += chunk
            if len(body) > MAX_BODY:
                raise BodyTooLarge(f"{url} answered with more than {MAX_BODY // 1024} KB")
        status = resp.status_code
    try:
        return status, json_bounds.loads(body)
    except ValueError:
        return status, None

