"""The jorb graph: decide -> act (run the script) -> wait for a reply | hold for the user | decide ... -> finish.

Each jorb is one thread (`jorb:<id>`) of this graph in the shared checkpointer. Waiting for a reply and pausing
for approval are `interrupt()`s, so a parked jorb costs nothing and survives any restart; a message or an
approval resumes it with `Command(resume=...)` (see service.py).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from integrations.base import side_effects_of
from orchestrator.channels.addresses import normalize_party
from orchestrator.core import json_bounds
from orchestrator.core.aio import run_sync_in_context
from orchestrator.tools.catalog import StaticProvider, ToolCatalog
from orchestrator.core.config import Settings
from orchestrator.core.visible import visible
from orchestrator.tools.executor import CallContext, ToolExecutor
from orchestrator.llm.client import ModelEndpointError
from orchestrator.storage.threads import WAITING, ThreadIndex
from .mission_tools import mission_tools
from .models import JorbRow
from .namespace import Namespace, bind_arguments
from .policies import PolicyContext, resolve_policy
from .prompt import budget_chars, build_prompt
from .retry import MODEL_DOWN, MODEL_ERROR, MODEL_UP
from .retry import model_down as down
from .schema import HistoryEntry, JorbState, JorbStatus, JorbStep, ScriptResult, parse_step
from .script_runner import ScriptCallError, SpawnScript, run_script
from .store import JorbStore

log = logging.getLogger(__name__)

HOUR, DAY = 3600.0, 86400.0


def named_by_task(row: JorbRow, state: JorbState, tool: str, args: dict[str, Any]) -> bool:
    """Whether the call only messages someone the task names: a contact the jorb was created with, an address or
    @handle written in its plan, or whom it wrote to before anything from outside reached it. Whom it wrote to
    after a counterpart's words did not become a contact of the task (the jorb adds them for routing only)."""
    if tool != "messages_send":
        return False
    to = str(args.get("to") or "").strip()
    if not to:
        return False
    given = row.options.get("given_contacts", row.contacts)  # rows from before given_contacts: their contacts
    if normalize_party(to) in {*given, *state.task_parties}:
        return True
    return re.search(rf"(?<![\w.@+-]){re.escape(to)}(?![\w@-]|\.\w)", row.plan or "", re.IGNORECASE) is not None


@dataclass
class JorbRuntime:
    settings: Settings
    llm: BaseChatModel
    catalog: ToolCatalog
    executor: ToolExecutor
    store: JorbStore
    threads: ThreadIndex
    spawn: SpawnScript

    def namespace(self, row: JorbRow) -> Namespace:
        return Namespace(self.catalog.all(), row.context)

    def mission_executor(self, workspace: str) -> ToolExecutor:
        """An executor over the workspace-confined job tools of a mission, sharing the effects ledger."""
        catalog = ToolCatalog([StaticProvider("mission", mission_tools(workspace))])
        return ToolExecutor(self.settings, catalog, self.executor.ledger)


def _usage_tokens(messages: list[Any]) -> int:
    total = 0
    for m in messages:
        usage = getattr(m, "usage_metadata", None) or {}
        total += int(usage.get("total_tokens", 0) or 0)
    return total


def _hold(reason: str, kind: str) -> dict[str, Any]:
    return {"decision": JorbStep(reasoning=f"({kind})", pause=True, pause_reason=reason), "hold_kind": kind}


def make_jorb_nodes(rt: JorbRuntime):
    cfg = rt.settings.jorbs

    def rate_limit(state: JorbState) -> dict[str, Any] | None:
        now = time.time()
        last_hour = sum(1 for t in state.step_times if now - t < HOUR)
        last_day = sum(1 for t in state.step_times if now - t < DAY)
        if last_hour >= cfg.max_steps_per_hour + state.extra_steps_hour:
            return _hold(f"Rate limit: {last_hour} steps in the last hour (jorbs.max_steps_per_hour = "
                         f"{cfg.max_steps_per_hour}). Approve to allow {cfg.max_steps_per_hour} more.", "rate_hour")
        if last_day >= cfg.max_steps_per_day + state.extra_steps_day:
            return _hold(f"Rate limit: {last_day} steps in the last day (jorbs.max_steps_per_day = "
                         f"{cfg.max_steps_per_day}). Approve to allow {cfg.max_steps_per_day} more.", "rate_day")
        if state.tokens_used >= cfg.token_budget + state.extra_tokens:
            return _hold(f"Token budget spent: {state.tokens_used} tokens (jorbs.token_budget = {cfg.token_budget}). "
                         "Approve to allow as many again.", "tokens")
        return None

    def decide(state: JorbState, config: RunnableConfig) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if row.status == JorbStatus.CANCELLED:
            return {"outcome": "cancelled"}
        rt.store.update(row.id, status=JorbStatus.RUNNING, pause_reason=None)
        limited = rate_limit(state)
        if limited:
            return limited
        namespace = rt.namespace(row)
        now = datetime.now(timezone.utc).astimezone().isoformat(timespec="minutes")
        system, event = build_prompt(row.name, row.plan, namespace.describe(), state.history, state.script_results,
                                     state.current_event, now, budget_chars(rt.settings))
        observations: list[Any] = [SystemMessage(content=system), HumanMessage(content=event)]
        policy = resolve_policy(row.policy)
        ctx = PolicyContext(settings=rt.settings, jorb=row.as_dict(), capabilities=namespace.describe(), llm=rt.llm)
        tokens = 0
        step_times = [t for t in state.step_times if time.time() - t < DAY] + [time.time()]
        error = ""
        for _attempt in range(cfg.max_malformed + 1):
            try:
                actions = run_sync_in_context(policy(ctx, observations))
            except ModelEndpointError as exc:
                return {**model_down(state, exc), "tokens_used": state.tokens_used + tokens}
            tokens += _usage_tokens(actions)
            reply = actions[-1] if actions else AIMessage(content="")
            try:
                step = parse_step(reply.text if hasattr(reply, "text") else str(reply.content))
            except ValueError as exc:
                error = str(exc)
                observations += [AIMessage(content=str(reply.content)),
                                 HumanMessage(content=f"Your reply could not be used: {error}. Answer again with only "
                                                      "the JSON object in the response format.")]
                continue
            rt.store.update(row.id, steps=row.steps + 1, tokens=row.tokens + tokens)
            return {"decision": step, "hold_kind": None, "step": state.step + 1, "step_times": step_times,
                    "tokens_used": state.tokens_used + tokens, **MODEL_UP}
        rt.store.update(row.id, steps=row.steps + 1, tokens=row.tokens + tokens)
        return {**_hold(f"The policy answered {cfg.max_malformed + 1} times with output that could not be used "
                        f"(last problem: {error}). Approve to let it try again, or cancel the jorb.", "malformed"),
                "step": state.step + 1, "step_times": step_times, "tokens_used": state.tokens_used + tokens, **MODEL_UP}

    def model_down(state: JorbState, exc: ModelEndpointError) -> dict[str, Any]:
        """Pause until the next try (a transient failure within jorbs.model_retry_for_h) or until the user says.
        A failed call is no step: it counts against neither rate limit (the waits bound the tries)."""
        kind, reason, fields = down(cfg, state.jorb_id, state.model_down_since, state.model_failures, exc)
        return {**_hold(reason, kind), **fields}

    def act(state: JorbState, config: RunnableConfig) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if row.status == JorbStatus.CANCELLED:  # cancelled while a confirmation of this script waited: run nothing more
            return {"outcome": "cancelled"}
        step = state.decision
        assert step is not None and step.script
        namespace = rt.namespace(row)
        counter = itertools.count(1)
        untrusted = {"seen": state.untrusted}  # what earlier steps read is still in what the model sees
        sends: list[HistoryEntry] = []
        parties: list[str] = []  # whom this step wrote to on the task's word alone
        effects = {"done": 0}  # effects this step's script made: past autonomy.max_side_effects_per_turn, each asks

        def ask(request: Any) -> Any:
            rt.store.update(row.id, status=JorbStatus.PAUSED, pause_reason=f"waiting for confirmation: {request.summary}")
            rt.threads.touch(row.thread_id, status=WAITING, kind="jorb", title=row.name)
            return interrupt({**request.payload(), "jorb_id": row.id, "jorb_name": row.name})

        def handle(ns: str, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
            index = next(counter)
            cap = namespace.resolve(ns, method)
            if cap is None:
                raise ScriptCallError(f"jarvis.{ns}.{method} is not a capability of this jorb"
                                      + (" (its context is restricted)" if row.context is not None else ""))
            try:
                bound = bind_arguments(cap.tool, args, kwargs)
            except TypeError as exc:
                raise ScriptCallError(str(exc)) from None
            # What a counterpart wrote may steer this call: it asks first, unless it only talks to someone the user
            # named (the task itself). What a script read steers everything alike.
            steered = state.counterpart_seen and not named_by_task(row, state, cap.tool.name, bound)
            ctx = CallContext(thread_id=row.thread_id, key=f"{row.thread_id}|step{state.step}|call{index}",
                              untrusted_seen=untrusted["seen"] or steered, effects_this_turn=effects["done"],
                              overrides=row.autonomy,
                              allowed_tools=namespace.tool_names, origin="jorb", config=config)
            outcome = rt.executor.execute(cap.tool.name, bound, ctx, confirm=ask)
            if outcome.ok and side_effects_of(cap.tool, bound):
                effects["done"] += 1
            if outcome.untrusted:
                untrusted["seen"] = True
            if not outcome.ok:
                raise ScriptCallError(outcome.content)
            if cap.tool.name == "messages_send":
                sends.append(HistoryEntry(role="jarvis", channel=str(bound.get("channel")), party=str(bound.get("to")),
                                          text=str(bound.get("text"))))
                if not (state.counterpart_seen or ctx.untrusted_seen):  # chosen from the task alone
                    parties.append(normalize_party(str(bound.get("to"))))
            if outcome.raw is not None:
                return outcome.raw
            try:
                return json_bounds.loads(outcome.content)  # a file's text can be any JSON, however deep
            except ValueError:
                return outcome.content

        rt.store.update(row.id, status=JorbStatus.RUNNING, pause_reason=None)
        result = run_script(step.script, handle, spawn=rt.spawn, timeout_s=cfg.script_timeout_s)
        record = ScriptResult(step=state.step, script=step.script, result=result.result, error=result.error,
                              output=result.output or None)
        event: dict[str, Any] = {"type": "script_result", "step": state.step}
        event.update({"error": result.error} if result.error else {"result": result.result})
        update: dict[str, Any] = {"script_results": [*state.script_results, record], "current_event": event,
                                   "untrusted": untrusted["seen"]}
        if sends:
            update["history"] = [*state.history, *sends]
        if parties:
            update["task_parties"] = sorted({*state.task_parties, *parties})
        return update

    def wait(state: JorbState) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if row.status == JorbStatus.CANCELLED:  # cancelled while its step ran (a retry in the sweep): not parked again
            return {"outcome": "cancelled"}
        last_sent = next((h for h in reversed(state.history) if h.role == "jarvis"), None)
        channel = last_sent.channel if last_sent else None
        party = last_sent.party if last_sent else None
        rt.store.update(row.id, status=JorbStatus.AWAITING_REPLY, waiting_channel=channel, waiting_party=party)
        pending = rt.store.take_pending(row.id)
        if not pending:
            signal = interrupt({"type": "await_reply", "jorb_id": row.id, "jorb_name": row.name, "channel": channel,
                                "party": party})
            if isinstance(signal, dict) and signal.get("type") == "cancel":
                return {"outcome": "cancelled"}
            pending = rt.store.take_pending(row.id)
            if not pending and isinstance(signal, dict) and signal.get("type") == "event":
                return {"current_event": signal.get("event"), "decision": None}
        return _deliver(state, pending, extra={})

    def _deliver(state: JorbState, pending: list[Any], extra: dict[str, Any]) -> dict[str, Any]:
        entries = []
        events = []
        for m in pending:
            if m.channel == "event":  # a reminder or other event queued for the jorb
                events.append(json.loads(m.text))
                continue
            role = "user" if m.is_user else "counterpart"
            at = m.created_at if m.created_at.tzinfo else m.created_at.replace(tzinfo=timezone.utc)
            entries.append(HistoryEntry(role=role, channel=m.channel, party=m.party, text=m.text,
                                        at=at.isoformat(timespec="seconds")))
        event: dict[str, Any] = {**extra}
        if entries:  # added to what `extra` holds already (the event of a step taken again)
            event.setdefault("type", "reply")
            event["messages"] = [*event.get("messages", []), *(e.model_dump() for e in entries)]
        if events:
            event.setdefault("type", "event")
            event["events"] = [*event.get("events", []), *events]
        heard = state.counterpart_seen or bool(events) or any(e.role != "user" for e in entries)
        return {"history": [*state.history, *entries], "current_event": event or None, "decision": None,
                "counterpart_seen": heard}

    def hold(state: JorbState) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if row.status == JorbStatus.CANCELLED:  # cancelled while its step ran: the pause would overwrite that
            return {"outcome": "cancelled"}
        # the model wrote it, maybe after reading a counterpart's reply: shown to the user as it is (core/visible.py)
        reason = visible(state.decision.pause_reason if state.decision else "paused")
        rt.store.update(row.id, status=JorbStatus.PAUSED, pause_reason=reason)
        asked = {"type": "jorb_pause", "jorb_id": row.id, "jorb_name": row.name, "reason": reason,
                 "kind": state.hold_kind or "policy"}
        if state.hold_kind == MODEL_DOWN:
            asked["retry_at"] = state.retry_at  # the sweep resumes it then (JorbService.retry_due)
        answer = interrupt(asked)
        kind = answer.get("type") if isinstance(answer, dict) else str(answer)
        note = answer.get("note") if isinstance(answer, dict) else None
        if kind == "cancel":
            return {"outcome": "cancelled"}
        if state.hold_kind in (MODEL_DOWN, MODEL_ERROR):
            # whatever the answer (the model asked nothing), the step it could not take is taken again: on the same
            # event (a reminder lives only there), with what came in meanwhile and the user's note if any
            again = dict(state.current_event or {})
            if note:
                again["note"] = note
            delivered = _deliver(state, rt.store.take_pending(row.id), extra=again)
            return {**delivered, "hold_kind": None, "retry_at": None}
        extra: dict[str, Any] = {}
        if kind == "approve":
            if state.hold_kind == "rate_hour":
                extra["extra_steps_hour"] = state.extra_steps_hour + cfg.max_steps_per_hour
            elif state.hold_kind == "rate_day":
                extra["extra_steps_day"] = state.extra_steps_day + cfg.max_steps_per_day
            elif state.hold_kind == "tokens":
                extra["extra_tokens"] = state.extra_tokens + cfg.token_budget
        event = {"type": "approved" if kind == "approve" else "rejected", "pause_reason": reason}
        if note:
            event["note"] = note
        delivered = _deliver(state, rt.store.take_pending(row.id), extra=event)
        return {**delivered, **extra, "hold_kind": None}

    def finish(state: JorbState) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if state.outcome == "cancelled" or row.status == JorbStatus.CANCELLED:
            rt.store.update(row.id, status=JorbStatus.CANCELLED, waiting_channel=None, waiting_party=None, pause_reason=None)
            return {"outcome": "cancelled"}
        result = state.decision.result if state.decision else None
        rt.store.update(row.id, status=JorbStatus.DONE, result=result, waiting_channel=None, waiting_party=None, pause_reason=None)
        return {"outcome": "done", "result": result}

    def after_decide(state: JorbState) -> str:
        if state.outcome:
            return "finish"
        d = state.decision
        if d is not None and d.script:
            return "act"
        return after_act(state)

    def after_act(state: JorbState) -> str:
        d = state.decision
        if state.outcome or d is None:
            return "finish" if state.outcome else "decide"
        if d.done:
            return "finish"
        if d.pause:
            return "hold"
        if d.await_reply:
            return "wait"
        return "decide"

    def after_park(state: JorbState) -> str:
        return "finish" if state.outcome else "decide"

    return decide, act, wait, hold, finish, after_decide, after_act, after_park


def build_jorb_graph(rt: JorbRuntime, checkpointer: Any):
    decide, act, wait, hold, finish, after_decide, after_act, after_park = make_jorb_nodes(rt)
    g = StateGraph(JorbState)
    g.add_node("decide", decide)
    g.add_node("act", act)
    g.add_node("wait", wait)
    g.add_node("hold", hold)
    g.add_node("finish", finish)
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", after_decide, ["act", "wait", "hold", "finish", "decide"])
    g.add_conditional_edges("act", after_act, ["wait", "hold", "finish", "decide"])
    g.add_conditional_edges("wait", after_park, ["decide", "finish"])
    g.add_conditional_edges("hold", after_park, ["decide", "finish"])
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer)
