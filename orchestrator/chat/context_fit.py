"""The planner's prompt held to the model's context window ([25] 3).

A model server given a prompt longer than its context either fails inside (HTTP 400 / 500 with its own words) or
silently drops the start of the prompt (the system text and the tools first). So the window is known here: the
built-in model's is the `n_ctx` its server is started with, any other's `models.<role>.context_tokens` or, when that
is not set, what the server says (llm/server_window.py: vLLM's /v1/models, llama.cpp's /props). History
folding aims at what the window leaves after the tools' schemas and the answer (never more than
`planner.history_token_budget`), and a prompt that cannot fit even then is refused before the request, with
what to change. Counts are estimates (about four characters a token, LangChain's `count_tokens_approximately`),
so a tenth of the window is kept spare.
"""

from __future__ import annotations

import json
from typing import Any

from orchestrator.core.config import Settings
from orchestrator.core.errors import ModelEndpointError
from orchestrator.llm.client import model_config
from orchestrator.llm.server_window import ServerWindows
from orchestrator.llm.tool_schema import describe_line

BUILTIN_FORMAT = "jarvis-chatml-tools"  # llm/llama_handler.py's NAME (that module imports llama_cpp)

ANSWER_TOKENS = 512  # kept free for the answer when models.<role>.max_tokens does not say
SPARE = 0.1


DEFAULT_WINDOW = 8192  # when neither the config nor the server says


def context_window(settings: Settings, windows: ServerWindows, role: str = "primary") -> tuple[int, str]:
    """(tokens, what says so): the config when it is set, else the server (llm/server_window.py, asked through the
    App's `windows`), else 8192."""
    used, cfg = model_config(settings, "heavy" if role == "heavy" else "primary")
    if cfg.provider == "embedded":
        return cfg.n_ctx, f"models.{used}.n_ctx"
    if cfg.context_tokens is not None:
        return cfg.context_tokens, f"models.{used}.context_tokens"
    found = windows.window(cfg, used)
    if found is not None:
        return found[0], f"the server's {found[1]}; models.{used}.context_tokens overrides it"
    return DEFAULT_WINDOW, f"models.{used}.context_tokens, unset: the default, as the server does not say"


LIST_FRAME_TOKENS = 80  # the built-in format's words around its function list


_COUNTED: dict[tuple, tuple[list[dict[str, Any]], int]] = {}  # (format, schema ids) -> (the schemas, tokens)
_COUNTED_MAX = 256


def schema_tokens(settings: Settings, schemas: list[dict[str, Any]]) -> int:
    """The tools' share of the prompt: their JSON, or the one line each of the built-in model's list. A planner
    step counts the same schemas (planner.openai_schema's dicts, made once per tool) up to three times and every
    turn again: the count is kept, with the schemas, so an id cannot stand for another dict."""
    if not schemas:
        return 0
    cfg = model_config(settings, "primary")[1]
    listed = cfg.provider == "embedded" and cfg.chat_format == BUILTIN_FORMAT
    key = (listed, *map(id, schemas))
    found = _COUNTED.get(key)
    if found is not None:
        return found[1]
    if listed:
        lines = "\n".join(f"functions.{(s.get('function') or {}).get('name')}: {describe_line(s)}" for s in schemas)
        tokens = len(lines) // 4 + LIST_FRAME_TOKENS
    else:
        tokens = len(json.dumps(schemas)) // 4
    if len(_COUNTED) >= _COUNTED_MAX:
        _COUNTED.clear()
    _COUNTED[key] = (list(schemas), tokens)
    return tokens


def answer_tokens(settings: Settings) -> int:
    return model_config(settings, "primary")[1].max_tokens or ANSWER_TOKENS


def history_budget(settings: Settings, windows: ServerWindows, tools_tokens: int, *, first_step: bool = True) -> int:
    """The token budget of system text and messages: the window less the tools, the answer and the spare part,
    at most planner.history_token_budget at a turn's first step. Later steps of the turn are held to the window
    only: a tool result that passes the budget is no reason to summarize again in the same turn (each summary is
    a model call, and a new summary in the system text makes a local server read the whole prompt again)."""
    window, _ = context_window(settings, windows)
    room = int(window * (1 - SPARE)) - tools_tokens - answer_tokens(settings)
    return max(1, min(settings.planner.history_token_budget, room) if first_step else room)


def window_setting(settings: Settings) -> str:
    """The setting that sets the primary model's window."""
    used, cfg = model_config(settings, "primary")
    return f"models.{used}.{'n_ctx' if cfg.provider == 'embedded' else 'context_tokens'}"


def check_fits(settings: Settings, windows: ServerWindows, prompt_tokens: int, tools_tokens: int) -> None:
    """Refuse, before the request, a prompt the model's context cannot hold."""
    window, setting = context_window(settings, windows)
    answer = answer_tokens(settings)
    needed = prompt_tokens + tools_tokens + answer
    if needed <= int(window * (1 - SPARE)):
        return
    raise ModelEndpointError(
        f"This turn needs about {needed} tokens (the conversation {prompt_tokens}, the tools' descriptions "
        f"{tools_tokens}, the answer {answer}), more than the model's context window of {window} tokens ({setting}) "
        "holds, so it was not sent. Shorten the message or what it attaches, lower planner.max_bound_tools, or use "
        f"a model with a larger context and raise {window_setting(settings)}.")
