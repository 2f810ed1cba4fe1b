"""Missions: jorbs in batch mode, speaking the Sheratan protocol (seed 004).

Each round the policy answers JSON only: `create_followup_jobs` with at most 5 `new_jobs` (list_files,
read_file, write_file inside the mission's workspace, or any tool by name), or `mission_complete` with a
summary. The jobs of a round run concurrently, one graph task each (so each can ask for confirmation on its
own), through the same ToolExecutor; their results come back as `previous_results` with the iteration number
and the goal. `commentary` and `btw` are kept in the history; `ask` pauses for the user; a write to a path not
read first is refused ("read before write"); more than 5 jobs are refused with the reason.
"""

from __future__ import annotations

import json
import operator
import time
from typing import Annotated, Any, Callable, Literal, NamedTuple

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt
from pydantic import BaseModel, Field, ValidationError, model_validator

from integrations.base import tool_meta

from orchestrator.core import json_bounds
from orchestrator.core.aio import run_sync_in_context
from orchestrator.core.visible import visible
from orchestrator.tools.executor import CallContext
from orchestrator.llm.client import ModelEndpointError
from .graph import DAY, JorbRuntime
from .mission_tools import MISSION_KINDS, mission_tools
from .namespace import Namespace
from .policies import PolicyContext, resolve_policy
from .retry import MODEL_DOWN, MODEL_ERROR, MODEL_UP, model_down
from .schema import JorbStatus, now_iso

MAX_JOBS = 5

PROTOCOL = """# SHERATAN AGENT PROTOCOL

ROLE: Autonomous agent. Create followup jobs until mission complete.

## ACTIONS
- list_files: {"patterns": ["*.py"]} -> files array (paths relative to the workspace)
- read_file: {"path": "x.py"} -> content string
- write_file: {"path": "x.md", "content": "..."} -> created
- any other tool by its name, with its arguments as params (see TOOLS)

## FORMAT
Response = JSON only. No text outside JSON.
create_followup_jobs: {"ok": true, "action": "create_followup_jobs", "new_jobs": [{"name": "X", "kind": "list_files|read_file|write_file|<tool>", "params": {...}}], "commentary": "optional", "btw": "optional", "ask": "optional question if truly blocked"}
mission_complete: {"ok": true, "action": "mission_complete", "summary": "what was accomplished"}

## RULES
1. JSON only
2. Max 5 jobs/round
3. Read before write (read a path, even one that does not exist yet, before writing it)
4. No questions (use ask only if truly blocked)
5. Use previous_results"""


class Job(BaseModel):
    name: str = "job"
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)


class MissionReply(BaseModel):
    ok: bool = True
    action: Literal["create_followup_jobs", "mission_complete"]
    new_jobs: list[Job] = Field(default_factory=list)
    commentary: str | None = None
    btw: str | None = None
    ask: str | None = None
    summary: str | None = None

    @model_validator(mode="after")
    def _complete_has_summary(self) -> "MissionReply":
        if self.action == "mission_complete" and not (self.summary or "").strip():
            raise ValueError("mission_complete needs a 'summary'")
        return self


class JobResult(BaseModel):
    iteration: int
    job: str
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)
    ok: bool = True
    result: Any = None
    error: str | None = None


class MissionNote(BaseModel):
    iteration: int
    kind: Literal["commentary", "btw", "ask", "answer", "refused"]
    text: str
    at: str = Field(default_factory=now_iso)


class MissionEnv(BaseModel):
    """What a job needs of its jorb row, read once per round by `plan` so the jobs of a round touch no database
    before their tool runs (a row read per job serialized the round). Autonomy, context and options are fixed
    when a jorb is created; the tool list of a restricted context is resolved again each round."""

    thread_id: str
    name: str
    workspace: str | None = None
    autonomy: dict[str, Any] = Field(default_factory=dict)
    allowed_tools: list[str] | None = None  # None: everything; else the tools and file jobs the context names


class MissionState(BaseModel):
    jorb_id: str
    iteration: int = 0
    results: Annotated[list[JobResult], operator.add] = Field(default_factory=list)
    notes: list[MissionNote] = Field(default_factory=list)
    read_paths: Annotated[list[str], operator.add] = Field(default_factory=list)
    # A job read content from outside (a file of the workspace, a listing): it stays in the notes and results the
    # model sees, so every later effect of the mission is escalated (ask first).
    untrusted: Annotated[bool, operator.or_] = False
    reply: MissionReply | None = None
    pending_ask: str | None = None
    ask_kind: str | None = None  # a question of Jarvis's, not the model's: the model was down (jorbs/retry.py)
    # The model was down: since when, how many tries failed, when the next one is due.
    model_down_since: float | None = None
    model_failures: int = 0
    retry_at: float | None = None
    step_times: list[float] = Field(default_factory=list)
    tokens_used: int = 0
    outcome: Literal["done", "cancelled"] | None = None
    summary: str | None = None
    env: MissionEnv | None = None  # the jorb row's part the jobs need (see MissionEnv)


class JobTask(BaseModel):
    jorb_id: str
    iteration: int
    index: int
    job: Job
    read_paths: list[str] = Field(default_factory=list)
    untrusted: bool = False  # the mission read content from outside in an earlier round
    env: MissionEnv  # what the job may touch, fixed when the round was planned


def _normalize(tool: Any, path: str) -> str:
    """The path as the mission's workspace tool resolves it (its ToolMeta `normalize`)."""
    normalize = tool_meta(tool).normalize
    return normalize(path) if normalize is not None else path


def parse_reply(text: str) -> MissionReply:
    start, end = (text or "").find("{"), (text or "").rfind("}")
    if start == -1 or end <= start:
        raise ValueError("the reply is not a JSON object")
    try:
        return MissionReply.model_validate(json_bounds.loads(text[start:end + 1]))
    except (json.JSONDecodeError, json_bounds.TooDeep) as exc:
        raise ValueError(f"the reply is not valid JSON ({exc})") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"the JSON does not follow the protocol: {problems}") from None


def _tool_list(namespace: Namespace) -> str:
    return ", ".join(sorted(c.tool.name for c in namespace.caps)) or "(none)"


def mission_env(row: Any, namespace: Namespace) -> MissionEnv:
    # What a job may run: what a jorb's script may call (never the tools that start more work, not_for_scripts:
    # jorb_create), and the file jobs; in a restricted context, only those it names.
    kinds = {k for k in MISSION_KINDS if row.context is None or k in row.context}
    allowed = sorted(namespace.tool_names | kinds)
    return MissionEnv(thread_id=row.thread_id, name=row.name, workspace=row.options.get("workspace"),
                      autonomy=row.autonomy, allowed_tools=allowed)


class MissionNodes(NamedTuple):
    """The mission graph's nodes and routers, by name (tests call one node directly)."""

    plan: Callable[..., dict[str, Any]]
    route: Callable[..., Any]
    job: Callable[..., dict[str, Any]]
    ask: Callable[..., dict[str, Any]]
    after_ask: Callable[..., str]
    finish: Callable[..., dict[str, Any]]


def make_mission_nodes(rt: JorbRuntime) -> MissionNodes:
    cfg = rt.settings.jorbs

    def plan(state: MissionState, config: RunnableConfig) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if row.status == JorbStatus.CANCELLED:
            return {"outcome": "cancelled"}
        rt.store.update(row.id, status=JorbStatus.RUNNING, pause_reason=None)
        now = time.time()
        recent = [t for t in state.step_times if now - t < DAY]
        if sum(1 for t in recent if now - t < 3600) >= cfg.max_steps_per_hour:
            return {"pending_ask": f"Rate limit: {cfg.max_steps_per_hour} rounds in the last hour; answer to continue.",
                    "reply": None}
        previous = [r.model_dump(include={"job", "kind", "ok", "result", "error"}) for r in state.results
                    if r.iteration == state.iteration]
        answers = [n.text for n in state.notes if n.kind == "answer" and n.iteration == state.iteration]
        refusals = [n.text for n in state.notes if n.kind == "refused" and n.iteration == state.iteration]
        context: dict[str, Any] = {"mission": {"goal": row.plan}, "previous_results": previous,
                                   "iteration": state.iteration + 1}
        if answers:
            context["answer_to_your_question"] = answers[-1]
        if refusals:
            context["refused"] = refusals
        namespace = rt.namespace(row)
        system = f"{PROTOCOL}\n\n## TOOLS\n{_tool_list(namespace)}"
        observations: list[Any] = [SystemMessage(content=system), HumanMessage(content=json.dumps(context, default=str))]
        policy = resolve_policy(row.policy)
        ctx = PolicyContext(settings=rt.settings, jorb=row.as_dict(), capabilities=system, llm=rt.llm)
        error = ""
        tokens = 0
        for _ in range(cfg.max_malformed + 1):
            try:
                actions = run_sync_in_context(policy(ctx, observations))
            except ModelEndpointError as exc:
                kind, reason, fields = model_down(cfg, state.jorb_id, state.model_down_since, state.model_failures, exc)
                return {"pending_ask": reason, "ask_kind": kind, "reply": None, **fields}
            reply_msg = actions[-1] if actions else AIMessage(content="")
            tokens += int((getattr(reply_msg, "usage_metadata", None) or {}).get("total_tokens", 0) or 0)
            try:
                reply = parse_reply(str(reply_msg.content))
            except ValueError as exc:
                error = str(exc)
                observations += [AIMessage(content=str(reply_msg.content)),
                                 HumanMessage(content=f"Not usable: {error}. Answer with the JSON only.")]
                continue
            break
        else:
            return {"pending_ask": f"The policy broke the protocol {cfg.max_malformed + 1} times ({error}). "
                                   "Answer to let it try again.", "reply": None}
        iteration = state.iteration + 1
        notes = list(state.notes)
        for kind in ("commentary", "btw"):
            text = getattr(reply, kind)
            if text:
                notes.append(MissionNote(iteration=iteration, kind=kind, text=text))
        update: dict[str, Any] = {"iteration": iteration, "step_times": recent + [now], "reply": reply,
                                  "tokens_used": state.tokens_used + tokens, "pending_ask": None, "ask_kind": None,
                                  "env": mission_env(row, namespace), **MODEL_UP}
        rt.store.update(row.id, steps=row.steps + 1, tokens=row.tokens + tokens)
        if reply.action == "create_followup_jobs" and len(reply.new_jobs) > MAX_JOBS:
            notes.append(MissionNote(iteration=iteration, kind="refused",
                                     text=f"{len(reply.new_jobs)} jobs in one round: at most {MAX_JOBS} are allowed; "
                                          "none of them ran. Send at most 5."))
            update["reply"] = reply.model_copy(update={"new_jobs": []})
        if reply.ask:
            notes.append(MissionNote(iteration=iteration, kind="ask", text=reply.ask))
            update["pending_ask"] = reply.ask
        update["notes"] = notes
        return update

    def route(state: MissionState) -> Any:
        if state.outcome:
            return "finish"
        if state.pending_ask:
            return "ask"
        reply = state.reply
        if reply is None:
            return "plan"
        if reply.action == "mission_complete":
            return "finish"
        sends = [Send("job", JobTask(jorb_id=state.jorb_id, iteration=state.iteration, index=i, job=job,
                                     read_paths=state.read_paths, untrusted=state.untrusted, env=state.env))
                 for i, job in enumerate(reply.new_jobs)]
        return sends or "plan"

    def job(task: JobTask, config: RunnableConfig) -> dict[str, Any]:
        env = task.env
        workspace = env.workspace
        kind, params = task.job.kind, dict(task.job.params)
        result = JobResult(iteration=task.iteration, job=task.job.name, kind=kind, params=params)
        read: list[str] = []
        local = {t.name: t for t in mission_tools(workspace)} if workspace else {}
        if kind in MISSION_KINDS and not workspace:
            result.ok, result.error = False, "this mission has no workspace: file jobs are not available"
            return {"results": [result]}
        if kind == "write_file":
            target = _normalize(local["write_file"], params.get("path", ""))
            if target not in task.read_paths:
                result.ok, result.error = False, (f"read before write: read {params.get('path')!r} in an earlier round "
                                                  "before writing it (even if it does not exist yet)")
                return {"results": [result]}
        if kind == "read_file":
            read.append(_normalize(local["read_file"], params.get("path", "")))

        def ask(request: Any) -> Any:
            rt.store.update(task.jorb_id, status=JorbStatus.PAUSED, pause_reason=f"waiting for confirmation: {request.summary}")
            return interrupt({**request.payload(), "jorb_id": task.jorb_id, "jorb_name": env.name})

        allowed = frozenset(env.allowed_tools) if env.allowed_tools is not None else None
        ctx = CallContext(thread_id=env.thread_id, key=f"{env.thread_id}|round{task.iteration}|job{task.index}",
                          untrusted_seen=task.untrusted, overrides=env.autonomy, allowed_tools=allowed,
                          origin="mission", config=config)
        executor = rt.mission_executor(workspace) if kind in MISSION_KINDS else rt.executor
        outcome = executor.execute(kind, params, ctx, confirm=ask)
        result.ok = outcome.ok
        if outcome.ok:
            # Structured results stay structured; text is the executor's capped rendering, so a big file does
            # not travel whole into every checkpoint and prompt.
            raw = outcome.raw
            result.result = raw if raw is not None and not isinstance(raw, str) else outcome.content
        else:
            result.error = outcome.content
            if kind == "read_file" and "does not exist" not in outcome.content:
                read = []  # a read that failed for another reason does not count
        return {"results": [result], "read_paths": read, "untrusted": outcome.untrusted}

    def ask(state: MissionState) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if row.status == JorbStatus.CANCELLED:  # cancelled while its round ran: the question would overwrite that
            return {"outcome": "cancelled", "pending_ask": None}
        question = visible(state.pending_ask or "")  # the model's words, shown to the user as they are
        rt.store.update(row.id, status=JorbStatus.PAUSED, pause_reason=question)
        asked = {"type": "jorb_pause", "jorb_id": row.id, "jorb_name": row.name, "reason": question,
                 "kind": state.ask_kind or "ask"}
        if state.ask_kind == MODEL_DOWN:
            asked["retry_at"] = state.retry_at  # the sweep resumes it then (JorbService.retry_due)
        answer = interrupt(asked)
        kind = answer.get("type") if isinstance(answer, dict) else "approve"
        if kind == "cancel":
            return {"outcome": "cancelled", "pending_ask": None}
        if state.ask_kind in (MODEL_DOWN, MODEL_ERROR):  # the model asked nothing: it plans the same round again
            note = answer.get("note") if isinstance(answer, dict) else None
            notes = [*state.notes, MissionNote(iteration=state.iteration, kind="answer", text=note)] if note else \
                state.notes
            return {"pending_ask": None, "ask_kind": None, "reply": None, "retry_at": None, "notes": notes}
        text = (answer.get("note") if isinstance(answer, dict) else str(answer)) or (
            "approved" if kind == "approve" else "rejected")
        notes = [*state.notes, MissionNote(iteration=state.iteration, kind="answer", text=text)]
        return {"notes": notes, "pending_ask": None, "reply": None}

    def after_ask(state: MissionState) -> str:
        # Jobs proposed alongside a question are not run: the policy plans again with the answer.
        return "finish" if state.outcome else "plan"

    def finish(state: MissionState) -> dict[str, Any]:
        row = rt.store.get(state.jorb_id)
        if state.outcome == "cancelled" or row.status == JorbStatus.CANCELLED:
            rt.store.update(row.id, status=JorbStatus.CANCELLED, pause_reason=None)
            return {"outcome": "cancelled"}
        summary = state.reply.summary if state.reply else None
        rt.store.update(row.id, status=JorbStatus.DONE, result={"summary": summary}, pause_reason=None)
        return {"outcome": "done", "summary": summary}

    return MissionNodes(plan=plan, route=route, job=job, ask=ask, after_ask=after_ask, finish=finish)


def build_mission_graph(rt: JorbRuntime, checkpointer: Any):
    nodes = make_mission_nodes(rt)
    g = StateGraph(MissionState)
    g.add_node("plan", nodes.plan)
    g.add_node("job", nodes.job, input_schema=JobTask)
    g.add_node("ask", nodes.ask)
    g.add_node("finish", nodes.finish)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", nodes.route, ["job", "ask", "finish", "plan"])
    g.add_edge("job", "plan")
    g.add_conditional_edges("ask", nodes.after_ask, ["plan", "finish"])
    g.add_edge("finish", END)
    return g.compile(checkpointer=checkpointer)
