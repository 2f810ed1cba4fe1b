"""The built-in model warmed up when `jarvis run` starts (server/services.py runs this once, in the background).

The embedded llama.cpp server starts on its first request, and every thread's prompt starts with the planner's
system text, which the server keeps evaluated from one request to the next. So the first message after a start
waited for the server to start and for the system text to be read (on the 135M model and 2 cores here: 0.9 s and
about 1 s of its 7-8 s first turn). A one-token request made at start does both before anyone asks; the first
request then finds the system text cached (llm/prompt_states.py keeps it for later threads too). The system
text names the hour (chat/planner.py), so a first message in the next hour finds the part before it.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from orchestrator.llm.client import model_config
from .planner import system_prompt
from .state import ConversationState


def wants_warm_up(settings: Any) -> bool:
    """Whether the primary model is the built-in one and `models.primary.warm_up` is on."""
    cfg = model_config(settings, "primary")[1]
    return cfg.provider == "embedded" and cfg.warm_up


def warm_up(app: Any) -> str:
    """Start the built-in model and have it read the system text; returns what was done (for the log)."""
    settings = app.settings
    t0 = time.perf_counter()
    reply = app.runtime.llm.bind(max_tokens=1).invoke(
        [SystemMessage(content=system_prompt(settings, ConversationState())), HumanMessage(content="Hello.")])
    read = (getattr(reply, "usage_metadata", None) or {}).get("input_tokens")
    return f"the built-in model read the system text ({read or 'some'} tokens) in {time.perf_counter() - t0:.1f} s"
