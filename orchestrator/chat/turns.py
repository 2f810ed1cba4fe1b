"""Driving one turn of the chat graph as a stream of events, for the CLI and the web UI.

`turn_events` yields them typed (chat/turn_events.py); `stream_turn` yields the same as wire dicts (with "event"),
which the TurnHub fans out to the web UI, SSE, the MCP offer and the channels:
  token        {"text"}                           a piece of the planner's answer, as the model streams it
  tool_call    {"tool", "args", "id"}              the planner asked for a tool
  tool_start   {"tool", "args", "key"}             the executor starts running it
  tool_end     {"tool", "ok", "duration_ms", "preview", "key"}
  progress     {...}                               long work (JARB stages, indexing...)
  confirmation {"interrupt_id", "ref", ...payload} the turn waits for the user's decision (`ref`: answers.item_ref)
  done         {"content", "message_id"}          the final answer
  stopped      {"content", "message_id"}          the user stopped the turn (then no done)
  error        {"message"}                         the turn failed; the thread is intact

A turn that is stopped or fails never reaches the graph's `respond`, where a turn that is answered ends its task
(the sites approved for it, the browser it drove: tools/site_grants.py). `end_task` (the executor's
`sites.end_task`, given by whoever runs the turn: the TurnHub, the CLI) ends it here instead, so its browser is
closed now rather than after `idle_timeout_s`. A turn waiting for a confirmation has not ended: its task stays.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.types import Command

from orchestrator.core.disk_full import disk_full_message, is_disk_full
from .history import INTERNAL_TAG
from .turn_events import Done, Error, Stopped, Token, ToolCall, TurnEvent, from_wire, to_wire
from orchestrator.llm.client import ModelEndpointError
from orchestrator.core.secrets import redact
from orchestrator.tools.answers import with_ref

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


STOPPED_TEXT = "Stopped: you stopped this turn."


class TurnStopped(Exception):
    """The user stopped the turn."""


class _StopWhenAsked(BaseCallbackHandler):
    """Ends a model call at its next token once the user has asked to stop, and lets no new call start: raised
    from the model's own stream, so a slow answer does not run on to its end first."""

    raise_error = True  # LangChain swallows a handler's exception otherwise

    def __init__(self, stop: threading.Event):
        self.stop = stop

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        if self.stop.is_set():
            raise TurnStopped()

    def on_llm_new_token(self, *args: Any, **kwargs: Any) -> None:
        if self.stop.is_set():
            raise TurnStopped()


class _QuietStop(logging.Filter):
    """LangChain logs every exception a callback raises as a warning ("Error in _StopWhenAsked.on_llm_new_token
    callback: TurnStopped()") before raising it: a Stop the user asked for is not an error, so that line is dropped
    (any other callback's errors still show)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and args[0] == _StopWhenAsked.__name__ and "TurnStopped" in str(args[-1]))


logging.getLogger("langchain_core.callbacks.manager").addFilter(_QuietStop())


def _close_stopped_turn(graph: Any, config: dict[str, Any], said: str = "") -> AIMessage:
    """Leave the thread as a finished turn: each tool call asked for but not run gets its answer ("not run"), so
    the next request to the model is well formed, and the turn ends with what the model had said so far (`said`)
    and a short note saying it was stopped."""
    state = graph.get_state(config)
    messages = state.values.get("messages", []) if isinstance(state.values, dict) else []
    last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    answered = {m.tool_call_id for m in messages[last_human + 1:] if isinstance(m, ToolMessage)}
    add: list[Any] = []
    for m in messages[last_human + 1:]:
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                if call.get("id") and call["id"] not in answered:
                    add.append(ToolMessage(content="Not run: the user stopped the turn.", tool_call_id=call["id"],
                                           name=call.get("name") or "tool", status="error"))
    note = AIMessage(content=f"{said.rstrip()}\n\n[{STOPPED_TEXT}]" if said.strip() else STOPPED_TEXT)
    graph.update_state(config, {"messages": [*add, note]}, as_node="respond")
    return note


def end_abandoned_task(end_task: Callable[[str], Any] | None, thread_id: str) -> None:
    """A turn ended without an answer (stopped, failed): its task ends, its browser is closed (see the top)."""
    if end_task is None:
        return
    try:
        end_task(thread_id)
    except Exception:  # noqa: BLE001 - the turn is over either way; the idle timeout closes what is left
        log.exception("ending the task of the turn on %s", thread_id)


def stream_turn(graph: Any, thread_id: str, graph_input: Any, stop: threading.Event | None = None,
                end_task: Callable[[str], Any] | None = None) -> Iterator[dict[str, Any]]:
    """The turn's events as wire dicts (see turn_events)."""
    for event in turn_events(graph, thread_id, graph_input, stop=stop, end_task=end_task):
        yield to_wire(event)


def turn_events(graph: Any, thread_id: str, graph_input: Any, stop: threading.Event | None = None,
                end_task: Callable[[str], Any] | None = None) -> Iterator[TurnEvent]:
    """The turn's events. `stop`, once set, ends the turn at the next token or step: what ran stays done (a tool
    already running finishes), nothing new starts, and the thread is left ready for the next message.
    `end_task(thread_id)` runs when the turn is stopped or fails (its browser closed)."""
    config: dict[str, Any] = thread_config(thread_id)
    if stop is not None:
        config["callbacks"] = [_StopWhenAsked(stop)]
    said: list[str] = []  # the answer streamed so far, kept when the user stops it
    try:
        # subgraphs=True: progress events written inside the JARB subgraph reach the caller too.
        for namespace, mode, data in graph.stream(graph_input, config, stream_mode=["messages", "custom", "updates"],
                                                  subgraphs=True):
            if stop is not None and stop.is_set():
                raise TurnStopped()
            if namespace and mode != "custom":
                continue
            if mode == "messages":
                chunk, meta = data
                if INTERNAL_TAG in (meta.get("tags") or []):
                    continue  # a summary being written, not the answer
                if meta.get("langgraph_node") == "planner" and isinstance(chunk, AIMessageChunk):
                    text = chunk.text if isinstance(chunk.content, str | list) else ""
                    if text:
                        said.append(text)
                        yield Token(text)
            elif mode == "custom":
                if isinstance(data, dict) and "event" in data:
                    yield from_wire(data)
            elif mode == "updates" and isinstance(data, dict):
                for node, update in data.items():
                    if node == "planner" and isinstance(update, dict):
                        said.clear()  # that call's text is in the thread now
                        for m in update.get("messages", []):
                            if isinstance(m, AIMessage):
                                for c in m.tool_calls:
                                    yield ToolCall(c["name"], c["args"], c.get("id"))
    except TurnStopped:
        end_abandoned_task(end_task, thread_id)
        note = _close_stopped_turn(graph, thread_config(thread_id), "".join(said))
        yield Stopped(note.text, note.id)
        return
    except ModelEndpointError as exc:
        end_abandoned_task(end_task, thread_id)
        yield Error(str(exc), "model_endpoint")
        return
    except Exception as exc:  # noqa: BLE001 - reported as an event; the checkpoint keeps the thread
        end_abandoned_task(end_task, thread_id)
        if is_disk_full(exc):
            log.error("turn on %s stopped: the disk is full (%s)", thread_id, exc)
            yield Error(disk_full_message("this turn could not be saved"), "disk_full")
            return
        log.exception("turn failed")
        yield Error(redact(f"{type(exc).__name__}: {exc}"), "internal")
        return

    state = graph.get_state(config)
    if state.interrupts:
        for intr in state.interrupts:
            value = intr.value if isinstance(intr.value, dict) else {"value": intr.value}
            shown = with_ref({"event": "confirmation", "interrupt_id": intr.id, "thread_id": thread_id, **value})
            yield from_wire(shown)  # a Confirmation: the payload shown with it travels in its extra
        return
    messages = state.values.get("messages", []) if isinstance(state.values, dict) else []
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage):
        yield Done(last.text, last.id)
    else:
        yield Done("", None)
