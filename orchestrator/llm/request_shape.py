"""The shape of a chat request that every OpenAI-compatible server understands, written once: applied to every
request the planner's client builds (llm.py) and to what reaches the built-in llama.cpp server (embedded.py)."""

from __future__ import annotations

from typing import Any

OPENAI_HOSTS = ("api.openai.com",)


def adapt_for_server(payload: dict[str, Any], base_url: str) -> bool:
    """Adapt a chat request body in place, whatever the provider setting; True when something changed.
    - an assistant message with tool calls carries content "" rather than null: llama-cpp-python's server
      refuses null (HTTP 500), which broke every later turn of a thread that had a tool call;
    - the token cap is sent as `max_tokens` to servers other than OpenAI's own: current clients send
      `max_completion_tokens`, which llama.cpp, llama-cpp-python and others ignore (a cap of 64 gave 372 words);
      OpenAI's newer models accept only `max_completion_tokens`, so it stays for them."""
    changed = False
    for message in payload.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("content") is None:
            message["content"] = ""
            changed = True
    host = base_url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0].lower()
    if "max_completion_tokens" in payload and host not in OPENAI_HOSTS:
        payload.setdefault("max_tokens", payload.pop("max_completion_tokens"))
        changed = True
    return changed
