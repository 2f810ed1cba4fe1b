"""Does the configured model call tools? One probe with one tool, before the user relies on it.

A server can answer GET /models and chat well, yet never call a tool: llama.cpp's server started without `--jinja`
answers a request with tools in plain words, and a small model then invents the file list it was asked for. So
`jarvis model check`, `jarvis doctor` and Settings ask the model once to list a folder with a `fs_list_dir` tool and
say which of three things came back:
  - `native`: a real tool call on the tool-call channel;
  - `text`: the call written as text in the answer, which Jarvis repairs (llm/model_output.py) and then runs;
  - `ignored`: words and no call, so the model cannot use Jarvis's tools; the answer says how to fix it.
The probe is one short generation (max_tokens bounded, no retries); its result is kept for a while per endpoint
and model, so Settings shows it again without asking the model again. The built-in model is not probed: its calls
come from Jarvis's own handler (llm/llama_handler.py), which constrains them to the tools given.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage

from orchestrator.core.config import Settings
from orchestrator.core.secrets import redact
from .client import Role, describe_endpoint_error, make_chat_model, model_config
from .model_output import sanitize_message

Outcome = Literal["native", "text", "ignored", "failed", "built-in"]

PROBE_TOOL = {"type": "function", "function": {
    "name": "fs_list_dir", "description": "List the files and folders in a folder.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "the folder"}},
                   "required": ["path"]}}}
PROBE_FOLDER = "/home/me/notes"
PROBE_MESSAGES = [SystemMessage("You are an assistant that uses the tools it is given."),
                  HumanMessage(f"List the files in the folder {PROBE_FOLDER}.")]
PROBE_MAX_TOKENS = 200  # a call is short; a model that writes prose instead is cut here
KEEP_S = 600.0

IGNORED_FIX = ("Give the model tool support in its server: start llama.cpp's server (llama-server) with --jinja so "
               "it uses the model's own chat template for tools; in Ollama, LM Studio or vLLM pick a model made for "
               "tool calling (Qwen2.5, Llama 3.1+, Mistral instruct; vLLM also needs --enable-auto-tool-choice and "
               "--tool-call-parser); or use Jarvis's built-in model.")


@dataclass(frozen=True)
class ToolCalling:
    outcome: Outcome
    message: str
    fix: str | None = None

    @property
    def ok(self) -> bool | None:
        """True: the model's calls reach Jarvis; False: it ignores tools; None: not known (not probed, failed)."""
        return {"native": True, "text": True, "ignored": False}.get(self.outcome)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


_kept: dict[tuple[str, str, str], tuple[float, ToolCalling]] = {}
_kept_lock = threading.Lock()


def _key(settings: Settings, role: Role) -> tuple[str, str, str]:
    used, cfg = model_config(settings, role)
    return used, cfg.base_url if cfg.provider != "embedded" else str(cfg.gguf), cfg.model


def last_probe(settings: Settings, role: Role = "primary") -> ToolCalling | None:
    """The result of a probe of this role's endpoint and model made in the last KEEP_S seconds, else None."""
    with _kept_lock:
        found = _kept.get(_key(settings, role))
    return found[1] if found and time.monotonic() - found[0] < KEEP_S else None


def probe_tool_calls(settings: Settings, role: Role = "primary") -> ToolCalling:
    """Ask the model once to list a folder with one tool and say what came back. Never raises."""
    used, cfg = model_config(settings, role)
    if cfg.provider == "embedded":
        return ToolCalling("built-in", "not probed: the built-in model's calls are made by Jarvis's own handler, "
                                       "constrained to the tools given")
    result = _probe(settings, used, cfg.base_url)  # type: ignore[arg-type]
    if result.outcome != "failed":
        with _kept_lock:
            _kept[_key(settings, role)] = (time.monotonic(), result)
    return result


def _probe(settings: Settings, role: Role, base_url: str) -> ToolCalling:
    # one try, one short answer: a probe that waits through retries would hold `jarvis doctor` for minutes
    trial = settings.model_copy(deep=True)
    cfg = model_config(trial, role)[1]
    cfg.max_retries = 0
    cfg.max_tokens = min(cfg.max_tokens or PROBE_MAX_TOKENS, PROBE_MAX_TOKENS)
    try:
        llm = make_chat_model(trial, role)
        reply = llm.bind_tools([PROBE_TOOL]).invoke(PROBE_MESSAGES)
    except Exception as exc:  # noqa: BLE001 - reported: the model check says why the model does not answer
        err = describe_endpoint_error(exc, base_url, role)
        return ToolCalling("failed", f"tool calling not checked: {redact(str(err or exc))[:300]}")
    if reply.tool_calls:
        names = ", ".join(sorted({c["name"] for c in reply.tool_calls}))
        return ToolCalling("native", f"calls tools: asked to list a folder, it sent a real tool call ({names})")
    repaired, repairs = sanitize_message(reply, {"fs_list_dir"})
    if repaired.tool_calls:
        return ToolCalling("text", "writes its tool calls as text in its answer instead of as tool calls; Jarvis "
                                   "repairs them (llm/model_output.py) and runs them, which works for simple calls "
                                   "but can miss",
                           "For calls Jarvis need not repair, start llama.cpp's server with --jinja, or use a "
                           "server and model with tool-call support.")
    if reply.invalid_tool_calls:
        return ToolCalling("text", "sends tool calls, but this one could not be read (its arguments are not JSON); "
                                   "Jarvis sends such errors back to the model to try again",
                           "A model made for tool calling, or a larger one, writes them whole.")
    said = " ".join(str(reply.content or "").split())[:120]
    return ToolCalling("ignored", "ignores tools: asked to list a folder with a tool, it answered in words"
                                  + (f" ({said!r})" if said else "") + ", so it cannot use Jarvis's tools and may "
                                  "invent what they would have shown", IGNORED_FIX)
