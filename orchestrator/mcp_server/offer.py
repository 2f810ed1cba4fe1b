"""What Jarvis offers an MCP client, and each call run under Jarvis's rules (the protocol itself is protocol.py).

Everything a client sends is outside content: its model may itself be injected, and its user may not be Jarvis's.
So:
  - a tool call runs through the process's ToolExecutor (policy, taint, ledger) as a call whose thread has read
    outside content (`untrusted_seen`) and whose every argument value counts as untrusted for argument provenance;
  - `ask_jarvis` is a chat turn in the client's own thread (`mcp:<client>:<name>`), tainted from its first message,
    the message marked as outside words (tools/provenance.py `OUTSIDE_WORDS`: not the user's, for provenance);
  - a call that must be confirmed is never confirmed by the client: it is moved into a chat thread of the client's
    and asked there, in Jarvis's own UI (and phone), as any chat confirmation. The client gets "waiting for your
    approval in Jarvis" and a pending id to poll with `jarvis_status`; a message to a thread that waits is refused,
    and no tool answers a confirmation. MCP elicitation is not used for it (docs/THREAT_MODEL.md says why).
A call waits for its answer up to `mcp_server.wait_s`, then returns the pending id.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from orchestrator.app import App
from orchestrator.chat.live_turns import LiveTurn, TurnBusy
from orchestrator.chat.turn_events import Confirmation, Done, Error, Stopped, from_wire, to_wire
from orchestrator.chat.turns import thread_config
from orchestrator.storage.telemetry import TelemetryHandler
from orchestrator.tools.executor import CallContext
from orchestrator.tools.provenance import outside_words
from .clients import client_thread, owns_thread

log = logging.getLogger(__name__)

ASK = "ask_jarvis"
STATUS = "jarvis_status"
OWN_TOOLS = (ASK, STATUS)
THREAD_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_QUESTION = 20_000
CALLS = "calls"  # the thread a client's direct calls are recorded under (runs view, ledger)
HANDED_OVER = "call-"  # the threads a direct call that must be confirmed is asked in

OWN_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    ASK: ("Ask Jarvis, the user's own assistant, in a named conversation of yours; the answer comes back. Anything "
          "Jarvis does for it that has an effect waits for the user's approval in Jarvis (then poll jarvis_status).",
          {"type": "object", "additionalProperties": False, "required": ["question"], "properties": {
              "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION},
              "thread": {"type": "string", "pattern": THREAD_NAME_RE, "default": "main",
                         "description": "the conversation's name (yours only)"}}}),
    STATUS: ("Where a call waiting for the user's approval in Jarvis stands, by the pending id it returned; the "
             "answer once it ran.",
             {"type": "object", "additionalProperties": False, "required": ["pending_id"], "properties": {
                 "pending_id": {"type": "string", "maxLength": 200}}}),
}


class Refused(Exception):
    """A call the client may not make (the text says why); an error result, nothing ran."""


@dataclass
class Offered:
    name: str
    description: str
    schema: dict[str, Any]
    read_only: bool


class _Handover(Exception):
    """A direct call needs the user's approval: it is asked in a chat thread of the client's instead."""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    return []


class McpOffer:
    """The tools and resources of `app` a client may use, as `app.settings.mcp_server` lists them."""

    def __init__(self, app: App, hub: Any = None):
        self.app = app
        self.settings = app.settings
        self.config = app.settings.mcp_server
        self._hub = hub
        self._schemas: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._validators: dict[int, tuple[dict[str, Any], Any]] = {}
        self.telemetry = TelemetryHandler(self.settings, graph_name="mcp")
        self._lock = threading.Lock()

    @property
    def hub(self) -> Any:
        return self._hub if self._hub is not None else self.app.turn_hub()

    # -- what is offered ---------------------------------------------------------------------------------------
    def tools(self) -> list[Offered]:
        return [o for o in map(self.offered, dict.fromkeys(self.config.tools)) if o is not None]

    def offered(self, name: str) -> Offered | None:
        """One listed tool as the client sees it, or None when it is not in the catalog now (switched off, its
        server down): not offered."""
        if name in OWN_SCHEMAS:
            description, schema = OWN_SCHEMAS[name]
            return Offered(name, description, schema, read_only=name == STATUS)
        tool = self.app.runtime.catalog.get(name)
        if tool is None:
            return None
        fn = self._function(tool)
        return Offered(name, fn.get("description") or name, fn.get("parameters") or {"type": "object"},
                       read_only=not any((tool.metadata or {}).get(k) for k in ("side_effects", "side_effects_for")))

    def _function(self, tool: Any) -> dict[str, Any]:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        with self._lock:
            cached = self._schemas.get(id(tool))
            if cached is None or cached[0] is not tool:
                cached = (tool, convert_to_openai_tool(tool)["function"])
                self._schemas[id(tool)] = cached
            return cached[1]

    def _schema_problem(self, schema: dict[str, Any], args: dict[str, Any]) -> str | None:
        """The arguments checked against the schema the client was shown, its validator compiled once (the SDK's
        own check compiles it and checks the schema itself on every call: most of a warm call's time)."""
        import jsonschema

        with self._lock:
            entry = self._validators.get(id(schema))
            if entry is None or entry[0] is not schema:
                entry = self._validators[id(schema)] = (schema, jsonschema.validators.validator_for(schema)(schema))
        error = jsonschema.exceptions.best_match(entry[1].iter_errors(args))
        if error is None:
            return None
        where = ".".join(map(str, error.path))
        return f"{where}: {error.message}" if where else error.message

    # -- one call ----------------------------------------------------------------------------------------------
    def call(self, client: str, name: str, args: dict[str, Any]) -> str:
        """The call's text for the client; Refused for what the client may not do."""
        if name not in self.config.tools:
            raise Refused(f"{name} is not offered to MCP clients (the user chooses in mcp_server.tools)")
        if not isinstance(args, dict):
            raise Refused("arguments must be a JSON object")
        offered = self.offered(name)  # the called tool only, not the whole list again
        if offered is None:
            raise Refused(f"{name} is not available now (see the tools listed)")
        problem = self._schema_problem(offered.schema, args)
        if problem is not None:
            raise Refused(f"Input validation error: {problem}")
        if name == ASK:
            return self.ask(client, str(args.get("question") or ""), str(args.get("thread") or "main"))
        if name == STATUS:
            return self.status(client, str(args.get("pending_id") or ""))
        return self.run_tool(client, name, args)

    def run_tool(self, client: str, name: str, args: dict[str, Any]) -> str:
        from langchain_core.runnables.config import get_callback_manager_for_config, patch_config

        rt = self.app.runtime
        key = f"mcp|{client}|{uuid.uuid4().hex}"
        thread = client_thread(client, CALLS)

        def hand_over(request: Any) -> Any:
            raise _Handover()

        # one run in the runs view per call, under the client's thread, as a turn's tool calls are: the callbacks
        # of a chain run made here (a RunnableLambda would do the same, inspecting its function's signature twice
        # on every call)
        config: Any = {"callbacks": [self.telemetry], "metadata": {"thread_id": thread}}
        run = get_callback_manager_for_config(config).on_chain_start(None, args, name=f"mcp {name}")
        ctx = CallContext(thread_id=thread, key=key, untrusted_seen=True, origin="mcp", untrusted_args=_strings(args),
                          config=patch_config(config, callbacks=run.get_child()))
        try:
            outcome = rt.executor.execute(name, args, ctx, confirm=hand_over)
        except BaseException as exc:
            run.on_chain_error(exc)
            if not isinstance(exc, _Handover):
                raise
            rt.executor.ledger.forget_asked(key)
            return self._ask_in_thread(client, name, args)
        run.on_chain_end(outcome)
        if not outcome.ok:
            raise Refused(outcome.content)
        return outcome.content

    def _ask_in_thread(self, client: str, name: str, args: dict[str, Any]) -> str:
        """The call placed in a new chat thread of the client's as the planner's step, so the chat graph runs it
        through the executor and asks the user there; it runs once, when the user approves."""
        thread = client_thread(client, f"{HANDED_OVER}{uuid.uuid4().hex[:12]}")
        asked = outside_words(f"The MCP client {client} asks to run {name} with {json.dumps(args, default=str)[:2000]}",
                              client)
        call = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "mcp_call", "type": "tool_call"}])
        # the thread's first turn, tainted: turn 1, as ask() counts; an untrusted_turn of 0 in a new thread equals
        # the trusted_after_turn its channel starts at (0, not the model's -1), which reads as cleared by the user
        self.app.graph.update_state(thread_config(thread), {"messages": [asked, call], "turn": 1,
                                                            "untrusted_turn": 1}, as_node="planner")
        return self._outcome(thread, self._start(thread, None))

    def ask(self, client: str, question: str, thread_name: str) -> str:
        if not re.match(THREAD_NAME_RE, thread_name):
            raise Refused("thread: letters, digits, '.', '_' or '-', at most 64")
        if not question.strip():
            raise Refused("question is empty")
        if thread_name == CALLS or thread_name.startswith(HANDED_OVER):
            raise Refused(f"thread: {CALLS!r} and names starting with {HANDED_OVER!r} are Jarvis's own")
        thread = client_thread(client, thread_name)
        if self.hub.running(thread) is not None:
            raise Refused(f"Jarvis is still working on {thread}; poll jarvis_status with pending_id={thread}")
        snapshot = self.app.graph.get_state(thread_config(thread))
        if snapshot.interrupts:
            raise Refused(f"{thread} is waiting for the user's approval in Jarvis; only the user answers it, in "
                          f"Jarvis. Poll jarvis_status with pending_id={thread}.")
        turn = int((snapshot.values or {}).get("turn", 0))
        message = outside_words(question, client)
        # the turn about to start has read outside content: the client's message
        return self._outcome(thread, self._start(thread, {"messages": [message], "untrusted_turn": turn + 1}))

    def _start(self, thread: str, graph_input: Any) -> LiveTurn:
        try:
            return self.hub.start(thread, graph_input)
        except TurnBusy:
            raise Refused(f"Jarvis is busy on {thread}; poll jarvis_status with pending_id={thread}") from None

    def _outcome(self, thread: str, turn: LiveTurn) -> str:
        if not turn.wait(self.config.wait_s):
            return f"Jarvis is still working on it. pending_id={thread} (poll jarvis_status)"
        events = [from_wire(e) for e in turn.events]
        asked = [to_wire(e) for e in events if isinstance(e, Confirmation)]
        if asked:
            return waiting(thread, asked)
        for event in reversed(events):
            if isinstance(event, Done | Stopped):
                return str(event.content or "")
            if isinstance(event, Error):
                raise Refused(f"Jarvis could not answer: {event.message}")
        return f"Jarvis ended the turn without an answer. pending_id={thread}"

    def status(self, client: str, pending_id: str) -> str:
        if not owns_thread(client, pending_id):
            raise Refused("no call of yours has this pending id")
        if self.hub.running(pending_id) is not None:
            return f"Jarvis is still working on it. pending_id={pending_id}"
        asked = self.app.pending(pending_id)
        if asked:
            return waiting(pending_id, asked)
        values = self.app.graph.get_state(thread_config(pending_id)).values or {}
        messages = values.get("messages") or []
        if not messages:
            raise Refused("no call of yours has this pending id")
        done = [m for m in messages if getattr(m, "type", "") == "tool" and getattr(m, "tool_call_id", "") == "mcp_call"]
        last = messages[-1]
        answer = last.text if isinstance(last, AIMessage) else ""
        if done:  # a call placed by _ask_in_thread: its result first, then Jarvis's words on it
            return f"{done[-1].text}\n\n{answer}".strip()
        return answer or f"Jarvis has not answered yet. pending_id={pending_id}"

    # -- resources ---------------------------------------------------------------------------------------------
    def resources(self) -> list[dict[str, str]]:
        if not self.config.resources:
            return []
        out = []
        memory = self.app.memory
        if memory is not None:
            for fact in memory.facts(limit=200):
                out.append({"uri": f"jarvis://memory/{fact.id}", "name": f"fact {fact.id}",
                            "description": fact.text[:200]})
        for doc in self.app.docs_index.documents()[:500]:
            out.append({"uri": f"jarvis://documents/{doc.id}", "name": doc.title or doc.source,
                        "description": f"{doc.kind}: {doc.source}"})
        return out

    def read_resource(self, uri: str) -> str:
        if not self.config.resources:
            raise Refused("resources are not offered (mcp_server.resources)")
        match = re.fullmatch(r"jarvis://(memory|documents)/(\d{1,12})", uri)
        if match is None:
            raise Refused(f"no resource {uri}")
        kind, ident = match.group(1), int(match.group(2))
        if kind == "memory":
            fact = self.app.memory.get(ident) if self.app.memory is not None else None
            if fact is None:
                raise Refused(f"no resource {uri}")
            return json.dumps({"fact": fact.text, "about": fact.entity, "source": fact.source}, ensure_ascii=False)
        doc = next((d for d in self.app.docs_index.documents() if d.id == ident), None)
        if doc is None:
            raise Refused(f"no resource {uri}")
        chunks = self.app.docs_index.first_chunks(doc.id, 50)
        return "\n\n".join(h.text for h in chunks)


def waiting(thread: str, asked: list[dict[str, Any]]) -> str:
    what = "; ".join(str(a.get("summary") or a.get("tool") or "a call") for a in asked)
    return (f"Waiting for your approval in Jarvis: {what}. The user answers it in Jarvis (its web UI or phone), "
            f"not here. pending_id={thread} (poll jarvis_status)")
