"""The chat graph: planner -> tool_node (one task per call) | jarb -> planner ... -> respond.

`App().graph` (orchestrator/app.py) is this graph compiled with a persistent checkpointer (SQLite under
storage.data_dir by default), so `thread_id` is all a client needs to continue, approve or inspect a conversation:

    graph = App().graph                       # or build_graph(), the same
    graph.invoke({"messages": [("user", "What is in ~/notes?")]}, {"configurable": {"thread_id": "t1"}})
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph._internal._constants import CONFIG_KEY_DURABILITY
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

from orchestrator.memory.asked import turn_asks_to_remember
from orchestrator.memory.context import UNTRUSTED_HEADER
from orchestrator.tools.executor import CallContext
from orchestrator.storage.checkpoints import prune_later
from .history import compact, estimate_tokens
from orchestrator.storage.telemetry import TelemetryHandler
from orchestrator.tools.index import FIND_TOOLS, found_names
from .answer_bounds import effects_before_each, over_the_cap
from .jarb_subgraph import JARB_TOOL, jarb_task_for, make_jarb_node
from .context_fit import check_fits, history_budget, schema_tokens
from .planner import call_model, openai_schema, results_instead_of_restated_call, step_limit_message, system_prompt
from orchestrator.tools.provenance import judge_calls
from .runtime import JarvisRuntime
from .state import (Attachment, CallOrigin, ConversationState, JarbTask, RouteChannels, ToolTask, TurnCount,
                    names_outside, route_view, tainted)
from .turn_context import turn_context, with_context
from orchestrator.storage.threads import IDLE, RUNNING, WAITING

log = logging.getLogger(__name__)

_URL_RE = re.compile(r"https?://[^\s<>\"')\]]+")
_YT_RE = re.compile(r"(?:youtube\.com|youtu\.be|youtube-nocookie\.com)", re.I)
_PATH_RE = re.compile(r"(?:(?<=\s)|^)((?:~|/)[^\s'\"]+\.(?:pdf|txt|md|markdown|csv|json|html?))\b", re.I)


def detect_attachments(text: str) -> list[Attachment]:
    found: list[Attachment] = []
    for url in _URL_RE.findall(text or ""):
        url = url.rstrip(".,;:")
        found.append(Attachment(kind="youtube" if _YT_RE.search(url) else "url", ref=url))
    for raw in _PATH_RE.findall(text or ""):
        p = Path(raw).expanduser()
        if p.is_file():
            found.append(Attachment(kind="pdf" if p.suffix.lower() == ".pdf" else "text", ref=str(p), name=p.name,
                                    typed=True))
    return found


def _thread_id(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("thread_id") or "default")


def checkpoints_so_far(config: RunnableConfig) -> int | None:
    """How many checkpoints the thread holds at most once the running step's is written: LangGraph numbers a
    thread's checkpoints by step, from -1 (the first input) on, across its turns, and update_state adds the next
    one. More only where a thread was forked from an older checkpoint (LangGraph's own server can; Jarvis does
    not), and those are trimmed once the step passes storage.keep_checkpoints. None: the step is not known."""
    step = (config.get("metadata") or {}).get("langgraph_step")
    return step + 2 if isinstance(step, int) else None


def running_from(config: RunnableConfig) -> str | None:
    """The id of the checkpoint the running step started from (in the thread's top namespace): the step's own is
    written only after it returns."""
    found = ((config.get("configurable") or {}).get("checkpoint_map") or {}).get("")
    return found if isinstance(found, str) else None


def _writer():
    try:
        return get_stream_writer()
    except Exception:  # noqa: BLE001 - outside a streaming run
        return None


def make_nodes(rt: JarvisRuntime, *, prunes: bool = True):
    """The graph's nodes over `rt`; `prunes`: the graph has Jarvis's own checkpointer, whose old checkpoints
    `respond` trims (under LangGraph's server the platform keeps them, in tables Jarvis must not touch)."""
    settings = rt.settings

    def begin_turn(state: ConversationState, config: RunnableConfig) -> dict[str, Any] | None:
        """The counts a turn starts with, when the planner is about to answer a message no step has answered yet
        (the last message is the user's: every step after it adds the model's answer or a tool's result). Part of
        the planner's first step, not a node of its own: a node is a LangGraph step, with a checkpoint written."""
        last = state.messages[-1] if state.messages else None
        if not isinstance(last, HumanMessage):
            return None
        text = last.text
        rt.threads.touch_later(_thread_id(config), title=text.strip().splitlines()[0] if text.strip() else None, status=RUNNING)
        known = {a.ref for a in state.attachments}
        new = [a for a in detect_attachments(text) if a.ref not in known]
        started: dict[str, Any] = {"turn": state.turn + 1, "turn_steps": 0,
                                   "effects": TurnCount(turn=state.turn + 1, count=0)}
        # only what changes: each value a node returns is a row of the checkpointer's writes, changed or not
        if state.stop_reason is not None:
            started["stop_reason"] = None
        if new:
            started["attachments"] = state.attachments + new
        return started

    def planner(state: ConversationState, config: RunnableConfig) -> dict[str, Any]:
        started = begin_turn(state, config) or {}
        if started:
            state = state.model_copy(update=started)
        if state.turn_steps >= settings.planner.max_steps:
            return {**started, "messages": [step_limit_message(settings)], "stop_reason": "step_limit"}
        tools = rt.tools_for_turn(state)
        last_human = next((m for m in reversed(state.messages) if isinstance(m, HumanMessage)), None)
        remembered = rt.remembered(_thread_id(config), state.turn, last_human.text if last_human is not None else "")
        tools_tokens = schema_tokens(settings, [openai_schema(t) for t in tools])
        system = system_prompt(settings, state)
        added = turn_context(state, remembered)  # after the latest message, not in the system prompt: the prefix holds
        thread_id = _thread_id(config)
        folded = compact(rt.llm, state, estimate_tokens([SystemMessage(content=system + (added or ""))]),
                         history_budget(settings, rt.windows, tools_tokens, first_step=state.turn_steps == 0), config,
                         archive=lambda msgs: rt.threads.archive(thread_id, msgs))
        live = state.messages
        if folded:
            gone = {r.id for r in folded["messages"]}
            live = [m for m in state.messages if m.id not in gone]
            state = state.model_copy(update={"summary": folded["summary"]})
            system = system_prompt(settings, state)
        prompt = [SystemMessage(content=system), *with_context(live, added)]
        check_fits(settings, rt.windows, estimate_tokens(prompt), tools_tokens)
        ai = call_model(rt.llm, tools, prompt, config, rt.model_base_url())
        new = [*folded.pop("messages", []), ai]
        update = {**started, **folded, "messages": new, "turn_steps": state.turn_steps + 1}
        bound = [t.name for t in tools]
        if bound != state.bound_tools:
            update["bound_tools"] = bound
        if remembered and UNTRUSTED_HEADER in remembered:
            update["untrusted_turn"] = state.turn  # the model read facts drawn from outside content
        if names_outside(state.attachments):
            update["untrusted_turn"] = state.turn  # the model read file names their makers chose
        return update

    def route(channels: RouteChannels) -> Any:
        state = route_view(channels)
        messages = state["messages"]
        last = messages[-1] if messages else None
        if state["stop_reason"] or not isinstance(last, AIMessage):
            return "respond"
        sends: list[Send] = []
        base = CallOrigin(message_id=last.id, turn=state["turn"], untrusted_turn=state["untrusted_turn"],
                          trusted_after_turn=state["trusted_after_turn"], effects=state["effects"],
                          memory_asked=turn_asks_to_remember(messages))
        judge = (judge_calls(rt.catalog, messages, tainted(state["untrusted_turn"], state["trusted_after_turn"]))
                 if settings.autonomy.argument_provenance else None)
        counted = effects_before_each(rt.catalog, last.tool_calls, TurnCount.model_validate(state["effects"]),
                                      state["turn"])
        for i, call in enumerate(last.tool_calls):
            base["effects"] = counted[i]  # the answer's earlier calls count (chat/answer_bounds.py)
            if (refused := over_the_cap(settings, i)) is not None:
                sends.append(Send("tool_node", ToolTask(call=dict(call), index=i, **base, refused=refused)))
                continue
            if call.get("name") == JARB_TOOL and settings.jarb.enabled:  # the tool factory, not the executor
                # (switched off, a call to it is a call to no tool: the executor says so, nothing is written)
                sends.append(Send("jarb", jarb_task_for(dict(call), i, base)))
                continue
            sends.append(Send("tool_node", ToolTask(call=dict(call), index=i, **base,
                                                    untrusted_args=judge(dict(call)) if judge else None)))
        offset = len(last.tool_calls)
        for j, bad in enumerate(last.invalid_tool_calls):
            unread = {"name": bad.get("name") or "", "args": bad.get("args"), "id": bad.get("id") or f"invalid_{j}"}
            error = bad.get("error") or "the arguments were not valid JSON"
            sends.append(Send("tool_node", ToolTask(call=unread, index=offset + j, invalid_error=error, **base)))
        return sends or "respond"

    def tool_node(task: ToolTask | dict, config: RunnableConfig) -> dict[str, Any]:
        # A Send's payload comes back as a dict from a checkpointer whose serializer does not know ToolTask
        # (LangGraph's own server with LANGGRAPH_STRICT_MSGPACK).
        task = ToolTask.model_validate(task) if isinstance(task, dict) else task
        call = task.call
        name, call_id = call.get("name") or "", call.get("id") or f"call_{task.index}"
        if task.invalid_error is not None:
            content = (f"Error: your call to {name or 'a tool'} could not be read ({task.invalid_error}); raw arguments: "
                       f"{str(call.get('args'))[:300]!r}. Call it again with the arguments as a JSON object.")
            return {"messages": [ToolMessage(content=content, tool_call_id=call_id, name=name or "unknown", status="error")]}
        if task.refused is not None:
            return {"messages": [ToolMessage(content=task.refused, tool_call_id=call_id, name=name or "unknown",
                                             status="error")]}
        thread_id = _thread_id(config)
        writer = _writer()
        # CallContext.config is typed a plain dict (tools/executor.py) though it holds this RunnableConfig
        ctx = CallContext(
            thread_id=thread_id,
            key=f"{thread_id}|{task.message_id}|{call_id}|{task.index}",
            untrusted_seen=tainted(task.untrusted_turn, task.trusted_after_turn),  # this turn or an earlier one
            effects_this_turn=task.effects.count if task.effects.turn == task.turn else 0,
            config=config,
            emit=writer,
            untrusted_args=task.untrusted_args,
            task=f"turn {task.turn}",  # a site approved for a browser holds for this turn (tools/site_grants.py)
            memory_asked=task.memory_asked,
        )

        def ask(request: Any) -> Any:
            rt.threads.touch(thread_id, status=WAITING)
            return interrupt(request.payload())

        outcome = rt.executor.execute(name, call.get("args") or {}, ctx, confirm=ask)
        recent = [name] if outcome.ok else []
        if name == FIND_TOOLS and outcome.ok:
            # all bound on the planner's next step (tools_for_turn reads them from this result); as recent tools,
            # of which later steps keep the newest first, the best ranked goes last
            recent = list(reversed(found_names(outcome.content)))
        update: dict[str, Any] = {
            "messages": [ToolMessage(content=outcome.content, tool_call_id=call_id, name=name,
                                     status="success" if outcome.ok else "error")],
            "recent_tools": recent,
        }
        if outcome.untrusted:
            update["untrusted_turn"] = task.turn
        if outcome.executed_effect:
            update["effects"] = TurnCount(turn=task.turn, count=1)
        return update

    def respond(state: ConversationState, config: RunnableConfig) -> dict[str, Any]:
        rt.threads.set_status_later(_thread_id(config), IDLE)
        rt.executor.sites.end_task(_thread_id(config))  # the turn's site approvals end, its browser is closed
        if prunes:
            prune_later(settings, _thread_id(config), at_most=checkpoints_so_far(config),
                        runs_from=running_from(config))
        last = state.messages[-1] if state.messages else None
        if isinstance(last, AIMessage) and not last.tool_calls and not (last.text or "").strip():
            return {"messages": [AIMessage(content="(The model returned an empty answer. Try rephrasing the request.)")]}
        if rt.memory_extractor is not None:  # proposals only, in the background: the user decides (memory/extraction.py)
            human = next((m for m in reversed(state.messages) if isinstance(m, HumanMessage)), None)
            if human is not None:
                rt.memory_extractor.propose_later(_thread_id(config), human.text, rt.llm)
        shown = results_instead_of_restated_call(state.messages)
        if shown is not None and isinstance(last, AIMessage):  # same id: the model's echo is replaced, not followed
            return {"messages": [AIMessage(id=last.id, content=shown, response_metadata=last.response_metadata,
                                           usage_metadata=last.usage_metadata)]}
        return {}

    return planner, route, tool_node, respond


def compile_chat_graph(rt: JarvisRuntime, checkpointer: Any = None, *, telemetry: bool = True):
    """Compile the chat graph over `rt` (the App builds it: orchestrator/app.py); `checkpointer=None` compiles
    without one."""
    planner, route, tool_node, respond = make_nodes(rt, prunes=checkpointer is not None)
    g = StateGraph(ConversationState)
    g.add_node("planner", planner)
    g.add_node("tool_node", tool_node, input_schema=ToolTask)
    g.add_node("respond", respond)
    g.add_node("jarb", make_jarb_node(rt), input_schema=JarbTask)
    g.add_edge(START, "planner")
    g.add_conditional_edges("planner", route, ["tool_node", "jarb", "respond"])
    g.add_edge("tool_node", "planner")
    g.add_edge("jarb", "planner")
    g.add_edge("respond", END)

    compiled = g.compile(checkpointer=checkpointer)
    # Room for max_steps planner rounds of (planner + tools) plus respond.
    cfg: RunnableConfig = {"recursion_limit": rt.settings.planner.max_steps * 3 + 10}
    if checkpointer is not None:
        # Each step's checkpoint is on disk before the next step starts (LangGraph writes it in the background by
        # default, while the next step runs): a tool's side effect then never starts before the model's call that
        # asked for it is saved, so a turn resumed after a crash finds that call (and the ledger its effect), and
        # does not plan it anew. The jorbs run so too (jorbs/service.py). Only the default: `durability=` given to
        # invoke or stream wins (LangGraph's own server passes its own).
        cfg["configurable"] = {CONFIG_KEY_DURABILITY: "sync"}
    if telemetry:
        cfg["callbacks"] = [TelemetryHandler(rt.settings)]
    return compiled.with_config(cfg)
