"""A model server's context window, asked of the server when the config does not say ([25] 3).

The planner fits its tools, its history and the answer to the model's window (chat/context_fit.py); a guess of
8192 tokens is wrong both ways: a llama.cpp server started with `-c 4096` cuts the prompt, one with 32k wastes
three quarters of it. Two servers say theirs:
  - vLLM: GET <base_url>/models lists each model with `max_model_len`;
  - llama.cpp's server: GET <root>/props has `n_ctx` (in `default_generation_settings` in current versions,
    at the top level in older ones).
Ollama is not asked: /api/show gives the model's trained `context_length`, not the `num_ctx` Ollama runs it with
(2048 or 4096 by default, whatever the model could take), so its figure would overstate the window; set
`models.<role>.context_tokens` for it. Each App keeps what its servers said (ServerWindows) for KEEP_S, then
asks again: a server restarted on the same address with another `-c` is seen within minutes, and a process-wide
memory would give one server's window to whatever listens on that port next.
"""

from __future__ import annotations

import logging
import threading
import time

import httpx

from orchestrator.core import secrets
from orchestrator.core.config import ModelConfig
from orchestrator.core.owned_transport import server_users
from .model_list import get_small_json

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2.0
KEEP_S = 300.0  # an answer, or no answer (nothing there, another kind of server), is kept this long
MAX_WINDOW = 10_000_000  # tokens; a larger figure is not a context window

class ServerWindows:
    """What each model server said its window is, asked at most once per KEEP_S per server and model."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], tuple[tuple[int, str] | None, float]] = {}
        self._lock = threading.Lock()

    def window(self, cfg: ModelConfig, role: str = "primary") -> tuple[int, str] | None:
        """(tokens, where the server says so), or None when it does not say."""
        key = (cfg.base_url.rstrip("/"), cfg.model)
        with self._lock:
            known = self._known.get(key)
            if known is not None and time.monotonic() - known[1] < KEEP_S:
                return known[0]
            try:
                api_key = secrets.resolve(cfg.api_key, what=f"models.{role}.api_key")
            except Exception:  # noqa: BLE001 - a key that cannot be read: the chat request will say so
                api_key = None
            found = ask_window(key[0], cfg.model, api_key, server_users=server_users(cfg))
            if found and (known is None or known[0] != found):
                log.info("models.%s: the server says its context window is %d tokens (%s)", role, *found)
            self._known[key] = (found, time.monotonic())
            return found


def ask_window(base_url: str, model: str, api_key: str | None = None,
               timeout_s: float = PROBE_TIMEOUT_S, server_users: tuple[int, ...] = ()) -> tuple[int, str] | None:
    listed = _get_json(f"{base_url}/models", api_key, timeout_s, server_users)
    entries = [e for e in (listed or {}).get("data") or [] if isinstance(e, dict)] if isinstance(listed, dict) else []
    entry = next((e for e in entries if e.get("id") == model), entries[0] if len(entries) == 1 else None)
    if entry is not None and _window(entry.get("max_model_len")):
        return entry["max_model_len"], f"max_model_len in GET {base_url}/models"
    root = base_url[:-3] if base_url.endswith("/v1") else base_url
    props = _get_json(f"{root}/props", api_key, timeout_s, server_users)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        for where, value in (("default_generation_settings.n_ctx", (settings or {}).get("n_ctx")
                              if isinstance(settings, dict) else None), ("n_ctx", props.get("n_ctx"))):
            if _window(value):
                return value, f"{where} in GET {root}/props"
    return None


def _window(value: object) -> bool:
    return type(value) is int and 0 < value <= MAX_WINDOW


def _get_json(url: str, api_key: str | None, timeout_s: float, server_users: tuple[int, ...] = ()) -> object:
    """The JSON a GET answers with, or None (no server, one of another user, an error status, not JSON, too big)."""
    try:
        status, body = get_small_json(url, api_key, timeout_s, server_users=server_users)
    except (httpx.HTTPError, ValueError):
        return None
    return body if status < 400 else None
