"""The JARB subgraph: the planner's `create_new_tool(spec)` becomes a tested, registered tool.

    spec_to_code -> generate_tests -> run_tests -> (repair -> run_tests)* -> register | give_up

`graph.route` sends each create_new_tool call here (one Send task per call); `jarb_node` runs the subgraph
and answers the call with a ToolMessage saying what was registered or what failed, then the planner runs
again and may call the new tool at once (the generated-tools provider reads the registry on each turn).

Each stage and attempt is streamed as {"event": "progress", "stage", "attempt", "message", "tool"} through
LangGraph's stream writer (visible with `stream(..., subgraphs=True)`, see turns.py). Code is written by the
`heavy` model when one is configured. Registration is an action through the ToolExecutor like every tool call
(`registration_tool`, effect `tool_create`): the autonomy policy, the confirmation (approve or deny; the code shown
is the code tested, so it cannot be edited) and the effects ledger apply, and a spec that declares network access
always asks: a generated tool gets the network only if the user approved that here.
"""

from __future__ import annotations

import json
import logging
from functools import cached_property
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, Field

from integrations.base import ToolError, set_tool_meta
from jarb_core.codecheck import check_module, check_tests, trim_output
from jarb_core.factory import progress_event
from jarb_core.generator import CodeGenerator
from jarb_core.manifest import derive_manifest
from jarb_core.registry import RegistryError
from jarb_core.sandbox import SandboxUnavailable
from jarb_core.spec import SpecError, ToolSpec
from jarb_core.testing import TestReport

from orchestrator.tools.executor import CallContext, ConfirmationRequest
from orchestrator.jarb.tools import make_factory
from orchestrator.llm.answer_end import AnswerAtTokenLimit, checked_reply
from orchestrator.llm.client import make_chat_model
from orchestrator.chat.runtime import JarvisRuntime
from orchestrator.chat.state import CallOrigin, JarbStage, JarbTask, tainted
from orchestrator.storage.threads import WAITING

log = logging.getLogger(__name__)

JARB_TOOL = "create_new_tool"


class CreateNewToolArgs(BaseModel):
    spec: ToolSpec = Field(description="the tool to build")


def create_new_tool_tool(max_repairs: int = 3) -> StructuredTool:
    """The planner's meta-tool. It is never executed as a function: graph.route sends its calls to JARB."""

    def create_new_tool(spec: Any) -> str:
        raise ToolError("create_new_tool is handled by the chat graph's JARB subgraph, not called directly")

    tool = StructuredTool.from_function(
        func=create_new_tool, name=JARB_TOOL, args_schema=CreateNewToolArgs, infer_schema=False,
        description=(
            "Build a new tool when none of your tools can do what is asked and a small Python function could. "
            f"JARB writes the code and its tests, runs them in a sandbox, repairs it (up to {max_repairs} times) "
            "and registers it; you can call the new tool right after. Give a precise spec: a snake_case name, "
            "what it does, typed args, the return type, side effects ([] for pure computation; network, fs_write, "
            "... when needed) and examples with expected results."),
    )
    # never executed as a function (graph.route sends its calls to JARB): its output is not read
    set_tool_meta(tool, side_effects=["tool_create"], source="meta",
                  trusted_output="never run: graph.route hands its calls to JARB")
    return tool


def jarb_task_for(call: dict[str, Any], index: int, base: CallOrigin) -> JarbTask:
    args = call.get("args") or {}
    spec = args.get("spec", args) if isinstance(args, dict) else args
    return JarbTask(tool_call_id=call.get("id") or f"call_{index}", spec=spec if isinstance(spec, dict) else {"raw": spec},
                    message_id=base["message_id"], index=index, turn=base["turn"],
                    untrusted=tainted(base["untrusted_turn"], base["trusted_after_turn"]))


def _writer():
    try:
        return get_stream_writer()
    except Exception:  # noqa: BLE001 - outside a run
        return lambda _event: None


def _thread_id(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("thread_id") or "default")


class JarbServices:
    """What the nodes use, made on first use (no model or registry is touched at graph start-up)."""

    def __init__(self, rt: JarvisRuntime):
        self.rt = rt
        self.settings = rt.settings

    @cached_property
    def factory(self):
        return make_factory(self.settings, taken_names=self.rt.catalog.names)

    @cached_property
    def model_role(self) -> str:
        return "heavy" if self.settings.models.heavy is not None else "primary"

    @cached_property
    def generator(self) -> CodeGenerator:
        llm = make_chat_model(self.settings, "heavy") if self.settings.models.heavy is not None else self.rt.llm
        # how each answer ended is judged here (jarb_core does not import the orchestrator): a cut answer is not code
        return CodeGenerator(llm, check_reply=lambda reply, what: checked_reply(reply, llm, what))


def build_jarb_subgraph(services: JarbServices):
    settings = services.settings
    max_repairs = settings.jarb.max_repairs

    def spec_of(task: JarbTask) -> ToolSpec:
        return ToolSpec.model_validate(task.spec)

    def spec_to_code(state: JarbTask, config: RunnableConfig) -> dict[str, Any]:
        emit = _writer()
        try:
            spec = services.factory.validate(state.spec)
        except SpecError as exc:
            return {"stage": JarbStage.FAILED, "error": str(exc)}
        emit(progress_event("spec_to_code", 0, f"writing {spec.name} with the {services.model_role} model",
                            tool=spec.name))
        try:
            draft = services.generator.write_module(spec, config)
        except AnswerAtTokenLimit as exc:  # nothing cut off is tested or run; the planner is told why, the turn goes on
            return {"stage": JarbStage.FAILED, "error": str(exc)}
        return {"spec": spec.model_dump(), "code": draft.code, "stage": JarbStage.GENERATE_TESTS}

    def generate_tests(state: JarbTask, config: RunnableConfig) -> dict[str, Any]:
        spec = spec_of(state)
        _writer()(progress_event("generate_tests", 0, f"writing tests for {spec.name}", tool=spec.name))
        try:
            draft = services.generator.write_tests(spec, config)
        except AnswerAtTokenLimit as exc:
            return {"stage": JarbStage.FAILED, "error": str(exc)}
        return {"tests": draft.code, "stage": JarbStage.RUN_TESTS}

    def run_tests(state: JarbTask) -> dict[str, Any]:
        spec = spec_of(state)
        emit = _writer()
        emit(progress_event("run_tests", state.attempt, f"testing {spec.name} in the sandbox "
                            f"(attempt {state.attempt + 1} of {max_repairs + 1})", tool=spec.name))
        try:
            report = services.factory.test(spec, state.code, state.tests)
        except SandboxUnavailable as exc:
            return {"stage": JarbStage.FAILED, "error": str(exc)}
        emit(progress_event("run_tests", state.attempt, f"{spec.name}: {report.summary}", tool=spec.name,
                            ok=report.passed))
        history = [*state.history, f"attempt {state.attempt + 1}: {report.summary}"]
        update: dict[str, Any] = {"report": report.to_dict(), "passed": report.passed, "history": history,
                                  "test_output": report.failure_text()}
        if report.passed:
            update["stage"] = JarbStage.REGISTER
        elif state.attempt < max_repairs:
            update["stage"] = JarbStage.REPAIR
        else:
            update["stage"] = JarbStage.FAILED
            update["error"] = (f"its tests still failed after {max_repairs} repair"
                               f"{'s' if max_repairs != 1 else ''}: {report.summary}")
        return update

    def repair(state: JarbTask, config: RunnableConfig) -> dict[str, Any]:
        spec = spec_of(state)
        attempt = state.attempt + 1
        _writer()(progress_event("repair", attempt, f"repairing {spec.name} (repair {attempt} of {max_repairs})",
                                 tool=spec.name))
        update: dict[str, Any] = {"attempt": attempt, "stage": JarbStage.RUN_TESTS}
        tests_problems = check_tests(state.tests, spec) if state.tests else ["there are no tests"]
        report = TestReport.from_dict(state.report)
        code = state.code or ""  # the model's last reply held no code: there is none to keep, it is written anew
        module_ok = (bool(code) and not check_module(code, spec)
                     and not derive_manifest(code).contradictions(spec.effects()))
        try:
            if tests_problems:
                draft = (services.generator.rewrite_tests(spec, state.tests, tests_problems, config) if state.tests
                         else services.generator.write_tests(spec, config))
                update["tests"] = draft.code
            if not (tests_problems and module_ok and report is not None and report.static):
                failure = state.test_output or (report.failure_text() if report else "the tests failed")
                draft = services.generator.repair_module(spec, code, state.tests or "", failure, config)
                update["code"] = draft.code
        except AnswerAtTokenLimit as exc:
            return {"attempt": attempt, "stage": JarbStage.FAILED, "error": str(exc)}
        return update

    def register(state: JarbTask, config: RunnableConfig) -> dict[str, Any]:
        """Registering is an action like any other (it writes code and trusts a tool): it goes through the
        executor, so the autonomy policy, the confirmation and the effects ledger apply as to every call."""
        spec = spec_of(state)
        thread_id = _thread_id(config)
        report = TestReport.from_dict(state.report) or TestReport(passed=False, summary="no test report")
        tool = registration_tool(services.factory, spec, state.code or "", state.tests or "", report,
                                 request_key=f"{thread_id}|{state.message_id}|{state.tool_call_id}")
        # CallContext.config is typed a plain dict (tools/executor.py) though it holds this RunnableConfig
        ctx = CallContext(thread_id=thread_id, key=f"{thread_id}|jarb|{state.tool_call_id}",
                          untrusted_seen=state.untrusted, config=config)

        def ask(request: ConfirmationRequest) -> Any:
            services.rt.threads.touch(thread_id, status=WAITING)
            return interrupt(request.payload())

        outcome = services.rt.executor.execute(JARB_TOOL, registration_args(spec, state.code or "", report), ctx, ask,
                                               tool=tool)
        if not outcome.ok:
            return {"stage": JarbStage.FAILED, "error": outcome.content}
        record = json.loads(outcome.content)
        _writer()(progress_event("register", state.attempt, f"registered {record['label']} ({record['path']})",
                                 tool=spec.name, ok=True))
        return {"stage": JarbStage.REGISTERED, "registered_name": record["name"],
                "registered_version": record["version"], "module_path": record["path"], "tests_path": record["tests_path"], "error": None}

    def give_up(state: JarbTask) -> dict[str, Any]:
        name = state.spec.get("name") if isinstance(state.spec, dict) else None
        update: dict[str, Any] = {}
        if state.code or state.tests:
            try:
                spec = spec_of(state)
                folder = services.factory.save_failed(spec, state.code, state.tests, TestReport.from_dict(state.report))
                update["failed_dir"] = str(folder)
            except Exception:  # noqa: BLE001 - keeping the attempt is a courtesy, not a requirement
                log.debug("could not save the failed attempt", exc_info=True)
        _writer()(progress_event("failed", state.attempt, f"could not build {name or 'the tool'}: {state.error}",
                                 tool=name, ok=False))
        return update

    def after(stage_names: dict[JarbStage, str]):
        def route(task: JarbTask) -> str:
            return stage_names.get(task.stage, "give_up")
        return route

    g = StateGraph(JarbTask)
    g.add_node("spec_to_code", spec_to_code)
    g.add_node("generate_tests", generate_tests)
    g.add_node("run_tests", run_tests)
    g.add_node("repair", repair)
    g.add_node("register", register)
    g.add_node("give_up", give_up)
    g.add_edge(START, "spec_to_code")
    g.add_conditional_edges("spec_to_code", after({JarbStage.GENERATE_TESTS: "generate_tests"}),
                            ["generate_tests", "give_up"])
    g.add_conditional_edges("generate_tests", after({JarbStage.RUN_TESTS: "run_tests"}), ["run_tests", "give_up"])
    g.add_conditional_edges("run_tests", after({JarbStage.REGISTER: "register", JarbStage.REPAIR: "repair"}),
                            ["register", "repair", "give_up"])
    g.add_conditional_edges("repair", after({JarbStage.RUN_TESTS: "run_tests"}), ["run_tests", "give_up"])
    g.add_conditional_edges("register", after({JarbStage.REGISTERED: END}), [END, "give_up"])
    g.add_edge("give_up", END)
    return g.compile()


def answer_text(task: JarbTask, trust_after: int) -> tuple[str, bool]:
    """The ToolMessage for the planner: what was registered, or what failed (and that nothing was registered)."""
    spec = task.spec if isinstance(task.spec, dict) else {}
    name = spec.get("name") or "the tool"
    if task.stage == JarbStage.REGISTERED and task.registered_name:
        report = TestReport.from_dict(task.report)
        repairs = f" after {task.attempt} repair{'s' if task.attempt != 1 else ''}" if task.attempt else ""
        args = ", ".join(f"{a.get('name')}: {a.get('type')}" for a in spec.get("args") or [])
        trust = (f" Until it has succeeded {trust_after} times, each call asks the user first." if trust_after else "")
        warnings = "".join(f" Warning: {w}" for w in (report.warnings if report else []))
        return (f"Registered {task.registered_name} v{task.registered_version} ({task.module_path}). Its tests passed"
                f"{repairs} ({report.summary if report else 'ok'}). You can call {task.registered_name}({args}) now."
                f"{trust}{warnings}"), True
    lines = [f"Nothing was registered: could not build {name}: {task.error or 'unknown error'}."]
    if task.history:
        lines.append("Attempts: " + "; ".join(task.history) + ".")
    report = TestReport.from_dict(task.report)
    if report is not None and not report.passed:
        lines.append("Last test output:\n" + trim_output(report.failure_text(), 2500))
    if task.failed_dir:
        lines.append(f"The last attempt is kept in {task.failed_dir}.")
    lines.append("Tell the user what failed; do not call the tool.")
    return "\n".join(lines), False


class RegistrationArgs(BaseModel):
    """What the user sees when asked to register a generated tool (approve or deny: it cannot be edited)."""

    name: str
    description: str
    side_effects: list[str]
    uses: list[str]
    tests: str
    code: str


def registration_args(spec: ToolSpec, code: str, report: TestReport) -> dict[str, Any]:
    # the whole code: what the user approves (and the approval's fingerprint) is every line that will run
    return {"name": spec.name, "description": spec.description, "side_effects": spec.effects(),
            "uses": derive_manifest(code).capabilities, "tests": report.summary, "code": code}


def uses_shown(manifest: Any, lines_each: int = 12) -> str:
    """What the code does beyond computing, every kind of it and where: a use after the first few of its kind
    (eight harmless writes, then one to ~/.bashrc) is not left out of the question."""
    kinds: dict[str, list[Any]] = {}
    for e in manifest.evidence:
        kinds.setdefault(e.capability, []).append(e)
    parts = []
    for kind, found in kinds.items():
        lines = ", ".join(str(e.line) for e in found[:lines_each]) + (f" and {len(found) - lines_each} more"
                                                                      if len(found) > lines_each else "")
        parts.append(f"{kind.replace('_', ' ')} at line{'s' if len(found) > 1 else ''} {lines} "
                     f"(first: {found[0].what}; last: {found[-1].what})" if len(found) > 1
                     else f"{kind.replace('_', ' ')} at line {lines} ({found[0].what})")
    return "; ".join(parts) or "nothing beyond computing"


def registration_tool(factory: Any, spec: ToolSpec, code: str, tests: str, report: TestReport, *,
                      request_key: str) -> StructuredTool:
    """The action of registering one tested tool: effect tool_create (and network, which always asks: a generated
    tool gets the network only if the user approved it here). Its result is the registry record as JSON."""
    network = "network" in spec.effects()
    manifest = derive_manifest(code)

    def register(**_shown: Any) -> str:
        try:
            record = factory.register(spec, code, tests, report, network_approved=network, request_key=request_key)
        except RegistryError as exc:
            raise ToolError(str(exc)) from None
        return json.dumps({"name": record.name, "version": record.version, "label": record.label,
                           "path": str(record.path), "tests_path": str(record.tests_path)})

    uses = uses_shown(manifest)
    summary = (f"Register the new tool {spec.name}" + (" WITH NETWORK ACCESS" if network else "") +
               f" (tests: {report.summary}; the code uses: {uses}).")
    tool = StructuredTool.from_function(func=register, name=JARB_TOOL, description="Register a generated tool.",
                                        args_schema=RegistrationArgs, infer_schema=False)
    demand = (f"{spec.name} declares network access: approving lets it talk to hosts on the network whenever it runs"
              if network else None)
    return set_tool_meta(tool, side_effects=["tool_create", *(["network"] if network else [])],
                         summarize=lambda _a: summary, editable=False, requires_confirmation=demand,
                         trusted_output="the registry's record of the tool this call registered")


def make_jarb_node(rt: JarvisRuntime):
    services = JarbServices(rt)
    subgraph = build_jarb_subgraph(services)

    def jarb(task: JarbTask, config: RunnableConfig) -> dict[str, Any]:
        final = JarbTask.model_validate(subgraph.invoke(task, config))
        content, ok = answer_text(final, rt.settings.jarb.trust_after)
        return {
            "messages": [ToolMessage(content=content, tool_call_id=task.tool_call_id, name=JARB_TOOL,
                                     status="success" if ok else "error")],
            "recent_tools": [final.registered_name] if ok and final.registered_name else [],
        }

    return jarb
