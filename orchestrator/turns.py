"""Driving one turn of the chat graph as a stream of plain events, for the CLI and the web UI.

Events (dicts with "event"):
  token        {"text"}                           a piece of the planner's answer, as the model streams it
  tool_call    {"tool", "args", "id"}              the planner asked for a tool
  tool_start   {"tool", "args", "key"}             the executor starts running it
  tool_end     {"tool", "ok", "duration_ms", "preview", "key"}
  progress     {...}                               long work (JARB stages, indexing...)
  confirmation {"interrupt_id", ...payload}        the turn waits for the user's decision
  done         {"content", "message_id"}          the final answer
  error        {"message"}                         the turn failed; the thread is intact
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langgraph.types import Command

from .disk_full import disk_full_message, is_disk_full
from .history import INTERNAL_TAG
from .llm import ModelEndpointError
from .secrets import redact

log = logging.getLogger(__name__)


def thread_config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def user_input(text: str, attachments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"messages": [HumanMessage(content=text)]}
    if attachments:
        payload["attachments"] = attachments
    return payload


def resume_command(decisions: dict[str, Any]) -> Command:
    """decisions: interrupt id -> resume value ({"decision": "approve"} ...)."""
    return Command(resume=decisions)


def stream_turn(graph: Any, thread_id: str, graph_input: Any) -> Iterator[dict[str, Any]]:
    config = thread_config(thread_id)
    try:
        # subgraphs=True: progress events written inside the JARB subgraph reach the caller too.
        for namespace, mode, data in graph.stream(graph_input, config, stream_mode=["messages", "custom", "updates"],
                                                  subgraphs=True):
            if namespace and mode != "custom":
                continue
            if mode == "messages":
                chunk, meta = data
                if INTERNAL_TAG in (meta.get("tags") or []):
                    continue  # a summary being written, not the answer
                if meta.get("langgraph_node") == "planner" and isinstance(chunk, AIMessageChunk):
                    text = chunk.text if isinstance(chunk.content, str | list) else ""
                    if text:
                        yield {"event": "token", "text": text}
            elif mode == "custom":
                if isinstance(data, dict) and "event" in data:
                    yield data
            elif mode == "updates" and isinstance(data, dict):
                for node, update in data.items():
                    if node == "planner" and isinstance(update, dict):
                        for m in update.get("messages", []):
                            if isinstance(m, AIMessage):
                                for c in m.tool_calls:
                                    yield {"event": "tool_call", "tool": c["name"], "args": c["args"], "id": c.get("id")}
    except ModelEndpointError as exc:
        yield {"event": "error", "message": str(exc), "kind": "model_endpoint"}
        return
    except Exception as exc:  # noqa: BLE001 - reported as an event; the checkpoint keeps the thread
        if is_disk_full(exc):
            log.error("turn on %s stopped: the disk is full (%s)", thread_id, exc)
            yield {"event": "error", "message": disk_full_message("this turn could not be saved"), "kind": "disk_full"}
            return
        log.exception("turn failed")
        yield {"event": "error", "message": redact(f"{type(exc).__name__}: {exc}"), "kind": "internal"}
        return

    state = graph.get_state(config)
    if state.interrupts:
        for intr in state.interrupts:
            value = intr.value if isinstance(intr.value, dict) else {"value": intr.value}
            yield {"event": "confirmation", "interrupt_id": intr.id, **value}
        return
    messages = state.values.get("messages", []) if isinstance(state.values, dict) else []
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage):
        yield {"event": "done", "content": last.text, "message_id": last.id}
    else:
        yield {"event": "done", "content": "", "message_id": None}
