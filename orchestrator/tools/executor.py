"""The one ToolExecutor: every tool call of the chat graph, jorb scripts and scheduled agents passes here.

Each call goes through ordered steps, each a small method with one job (`_prepare` lists them):
  find      the tool in the catalog (the contract checked: integrations/base.ToolMeta), within the task's tools
  validate  its arguments against its schema
  replay    a call the effects ledger has seen: its recorded result, never a second run; a call cut off midway
            is shown to the user as "may have happened" instead of being repeated
  fix       what depends on the moment (ToolMeta.fix_args: a time in words) fixed when first asked about
  scope     a browser step: the site it acts on (tools/site_grants.py)
  decide    `autonomy.decide`, the only place a mode is decided, given the facts: effects, taint, argument
            provenance, the turn's budget, site grants
  confirm   ask through the caller's `confirm` function (tools/confirm.py) until an answer settles the call
  record    the effect in the ledger before it runs
  run       the tool (an async-only one on the background loop: `execute`)
  finish    the result as the model gets it (a site's text withheld until approved), the ledger completed, and
            a CallOutcome whose content becomes the ToolMessage
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from langchain_core.callbacks.manager import dispatch_custom_event
from langchain_core.tools import BaseTool
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from pydantic import BaseModel, ValidationError

from integrations.base import (ToolContractError, ToolError, confirmation_demand, is_untrusted, sends_out,
                               side_effects_of, summarize_call, tool_meta)

from orchestrator.tools import autonomy
from orchestrator.core import secrets
from orchestrator.core.config import Mode, Settings
from .confirm import Confirm, ConfirmationRequest, Decision, Denied, parse_decision, settle
from .ledger import SKIPPED, STARTED, EffectsLedger, call_fingerprint
from .site_grants import SiteGrants, SiteScope, grant_note
from orchestrator.storage.telemetry import NOT_RUN_EVENT

log = logging.getLogger(__name__)

__all__ = ["CallContext", "CallOutcome", "Confirm", "ConfirmationRequest", "Decision", "ToolExecutor", "parse_decision"]

MAX_RESULT_CHARS = 40_000


def _record_not_run(outcome: "CallOutcome") -> None:
    """Tell the run's callbacks (telemetry) about a call refused before it ran: no tool callback fires for it, so
    `jarvis runs` counted 0 tools for a turn whose live view and history show the refused call."""
    try:
        dispatch_custom_event(NOT_RUN_EVENT, {"tool": outcome.tool, "ok": outcome.ok, "reason": outcome.content[:500]})
    except RuntimeError:
        pass  # not inside a graph run (a jorb script's call): there is no run to count it in




@dataclass
class CallContext:
    thread_id: str
    key: str  # idempotency key of this call
    untrusted_seen: bool = False
    effects_this_turn: int = 0
    overrides: Mapping[str, Mode] | None = None  # scoped autonomy (a jorb's approved overrides)
    allowed_tools: frozenset[str] | None = None  # a restricted context (jorbs)
    origin: str = "chat"
    config: RunnableConfig | None = None  # so callbacks (telemetry) see the tool run
    emit: Callable[[dict[str, Any]], None] | None = None  # progress events for the CLI / UI
    # argument provenance (tools/provenance.py): None = not judged (the blanket rule), else the untrusted deciding values.
    # The caller judges it, and only when autonomy.argument_provenance is on (chat/graph.py): the executor passes it
    # to autonomy.decide as it is
    untrusted_args: list[str] | None = None
    task: str | None = None  # the task (a chat turn) a site approval is bound to (tools/site_grants.py); None: none
    # whether the chat turn's user message asked to remember or forget (memory/asked.py); None: no user message
    memory_asked: bool | None = None


# The key under the tool's RunnableConfig "configurable" where a tool finds what it may know of its call (thread,
# whether the turn read outside content, and which outside results it read): memory tools mark what they store as
# the user's words or as content, and say which content.
CALL_CONTEXT = "jarvis_call"

# The arguments that say what an untrusted read was about, first found first: a file, a page, an email thread.
SOURCE_ARGS = ("path", "url", "uri", "message_id", "thread_id", "task_id", "folder", "query", "question", "entity")
MAX_SOURCE_CHARS = 200


def describe_source(tool: str, args: Mapping[str, Any]) -> str:
    """One line naming an untrusted read: the tool and what its arguments say it read ("fs_read_text
    path=/home/me/statement.txt"); just the tool when they name nothing. Secrets masked, line breaks flattened."""
    for key in SOURCE_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            shown = " ".join(secrets.redact(value).split())
            if len(shown) > MAX_SOURCE_CHARS:
                shown = shown[:MAX_SOURCE_CHARS] + "..."
            return f"{tool} {key}={shown}"
    return tool


class ReadSources:
    """Which untrusted results each thread's work read (tool and what it named), in this process: the provenance
    of a fact drawn from content (memory.tools.provenance_of). A thread's record is dropped when a later turn runs a
    call with no outside content in view (the user cleared the thread), so an old read is not named again; reads of
    the same turn are kept (parallel calls of one step). Bounded: the newest PER_THREAD reads of the newest THREADS."""

    PER_THREAD = 20
    THREADS = 512

    def __init__(self) -> None:
        self._reads: dict[str, list[tuple[str | None, str]]] = {}
        self._lock = threading.Lock()

    def saw(self, thread_id: str, task: str | None, source: str) -> None:
        with self._lock:
            reads = self._reads.pop(thread_id, [])
            reads = [r for r in reads if r[1] != source] + [(task, source)]
            self._reads[thread_id] = reads[-self.PER_THREAD:]  # re-inserted: the thread is the newest
            while len(self._reads) > self.THREADS:
                self._reads.pop(next(iter(self._reads)))

    def of(self, thread_id: str, task: str | None, untrusted_seen: bool) -> list[str]:
        with self._lock:
            reads = self._reads.get(thread_id, [])
            if not untrusted_seen:
                kept = [r for r in reads if r[0] == task and task is not None]
                if kept:
                    self._reads[thread_id] = kept
                else:
                    self._reads.pop(thread_id, None)
                return []
            return [source for _, source in reads]


def tool_config(ctx: CallContext, read: list[str] | None = None) -> RunnableConfig:
    """`read`: the untrusted reads of the call's thread this process saw (ReadSources), newest last."""
    config = RunnableConfig(**(ctx.config or {}))  # the caller's config, whatever keys it holds
    config["configurable"] = {**(config.get("configurable") or {}), CALL_CONTEXT: {
        "thread_id": ctx.thread_id, "key": ctx.key, "untrusted_seen": ctx.untrusted_seen, "origin": ctx.origin,
        "task": ctx.task, "read": list(read or [])}}
    return config


def call_context(config: dict | None) -> dict | None:
    """What a tool may know of its call (tool_config), from the RunnableConfig it was given; None outside the
    executor."""
    call = ((config or {}).get("configurable") or {}).get(CALL_CONTEXT)
    return call if isinstance(call, dict) else None


def read_outside_content(config: dict | None) -> bool:
    """Whether the call's thread (or jorb) had read content from outside the conversation: what the tool writes
    or starts may be that content's words. A call with no context counts as having read some."""
    call = call_context(config)
    return call is None or bool(call.get("untrusted_seen", True))


@dataclass
class CallOutcome:
    tool: str
    content: str
    ok: bool = True
    executed_effect: bool = False  # a side effect ran now (counts toward the turn's budget)
    untrusted: bool = False  # the content came from outside the conversation
    replayed: bool = False
    args: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    raw: Any = None


@dataclass
class _Prepared:
    tool: BaseTool
    args: dict[str, Any]
    effects: list[str]


@dataclass(frozen=True)
class _Site:
    """A browser step: its tool's SiteScope and the origin the call acts on (None: a page nobody can tell)."""

    scope: SiteScope
    origin: str | None


def to_text(result: Any) -> str:
    if isinstance(result, str):  # MCP tools give their text already (mcp.provider.content_to_text)
        text = result
    else:
        text = json.dumps(result, default=str, ensure_ascii=False)
    return _capped(secrets.redact(text))


def _capped(text: str) -> str:
    """A result or an error as the model and the checkpoint get it: at most MAX_RESULT_CHARS (an MCP server's error
    of 3 MB went whole into the thread and made its turn too long for the model)."""
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[... {len(text) - MAX_RESULT_CHARS} more characters cut]"
    return text


_VALIDATORS: dict[int, tuple[dict, Any]] = {}


def _schema_error(schema: dict, args: dict[str, Any]) -> Any:
    """The most relevant JSON-schema error of args, or None. Validators are compiled once per schema (an MCP
    tool's schema is checked on every call); a schema that is itself invalid is not held against the call."""
    import jsonschema

    entry = _VALIDATORS.get(id(schema))
    if entry is None or entry[0] is not schema:
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = cls(schema)
        except jsonschema.SchemaError as exc:
            log.warning("a tool's argument schema is not valid JSON schema (%s); its arguments are not checked",
                        exc.message)
            validator = None
        if len(_VALIDATORS) > 4096:
            _VALIDATORS.clear()
        entry = _VALIDATORS[id(schema)] = (schema, validator)
    if entry[1] is None:
        return None
    return jsonschema.exceptions.best_match(entry[1].iter_errors(args))


class ToolExecutor:
    def __init__(self, settings: Settings, catalog: Any, ledger: EffectsLedger | None = None):
        self.settings = settings
        self.catalog = catalog  # orchestrator.tools.catalog.ToolCatalog (duck-typed: .get(name), .names())
        self.ledger = ledger or EffectsLedger(settings)
        self.sites = SiteGrants()  # browser steps approved per site and task
        self.reads = ReadSources()  # the untrusted results each thread read: a remembered fact's provenance

    # -- lookup and validation ------------------------------------------------------------------
    def _unknown(self, name: str) -> CallOutcome:
        disabled = getattr(self.catalog, "disabled_message", None)
        message = disabled(name) if disabled is not None else None
        if message:
            return CallOutcome(name, message, ok=False)
        unavailable = getattr(self.catalog, "unavailable_message", None)
        message = unavailable(name) if unavailable is not None else None
        if message:
            return CallOutcome(name, message, ok=False)
        names = self.catalog.names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return CallOutcome(name, f"Error: there is no tool named {name!r}.{hint} Use one of the tools you were given.", ok=False)

    @staticmethod
    def validate_args(tool: BaseTool, args: Any) -> tuple[dict[str, Any] | None, str | None]:
        if not isinstance(args, dict):
            return None, f"arguments must be a JSON object, got {type(args).__name__}"
        schema = tool.args_schema
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            try:
                schema.model_validate(args)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
                return None, problems
        elif isinstance(schema, dict):
            error = _schema_error(schema, args)
            if error is not None:
                where = ".".join(map(str, error.path)) or "arguments"
                return None, f"{where}: {error.message}"
        return args, None

    # -- the steps before a call runs (shared by the sync and async paths) ------------------------------------
    def _prepare(self, name: str, args: Any, ctx: CallContext, confirm: Confirm,
                 tool: BaseTool | None = None) -> _Prepared | CallOutcome:
        """The steps before a call runs, in order: find, validate, replay from the ledger, fix the moment, scope to
        a site, decide, confirm, record. Each gives the next what it needs, or the call's outcome, which ends the call there."""
        found = self._find(name, ctx, tool)
        if isinstance(found, CallOutcome):
            return found
        valid = self._validate(found, args)
        if isinstance(valid, CallOutcome):
            return valid
        effects = side_effects_of(found, valid)
        made = call_fingerprint(name, valid)  # the call as the work makes it, before any edit
        replayed = self._replay(found, valid, effects, made, ctx, confirm)
        if replayed is not None:
            return replayed
        valid, moment = self._fixed(found, valid, ctx)
        site = self._site(found, valid, ctx)
        decision = self._decide(found, valid, effects, ctx, site)
        if decision.mode == "deny":
            return CallOutcome(name, f"Not done: {decision.reason} ({name}). Tell the user it was not done; they can "
                                     "change autonomy.effects in the config to allow it.", ok=False, args=valid)
        if decision.mode == "confirm":
            answered = self._confirm(found, valid, effects, decision, made, ctx, confirm, site, moment)
            if isinstance(answered, CallOutcome):
                return answered
            valid = answered if moment is None else self._fixed(found, answered, ctx, moment)[0]
        return self._record(found, valid, effects, made, ctx, confirm)

    def _find(self, name: str, ctx: CallContext, tool: BaseTool | None) -> BaseTool | CallOutcome:
        """The tool, from the catalog (or the one given: an action outside it), within the task's tools."""
        tool = tool if tool is not None else self.catalog.get(name)
        if tool is None:
            return self._unknown(name)
        if ctx.allowed_tools is not None and name not in ctx.allowed_tools:
            return CallOutcome(name, f"Error: {name} is outside this task's context; it may only use: "
                                     f"{', '.join(sorted(ctx.allowed_tools))}.", ok=False)
        try:
            tool_meta(tool)
        except ToolContractError as exc:  # a tool given directly is held to the contract the catalog checks
            return CallOutcome(name, f"Error: {name} cannot be used: {exc}.", ok=False)
        return tool

    def _validate(self, tool: BaseTool, args: Any) -> dict[str, Any] | CallOutcome:
        valid, problem = self.validate_args(tool, args)
        if valid is None:
            return CallOutcome(tool.name, f"Error: bad arguments for {tool.name}: {problem}. Call it again with valid "
                                          "arguments.", ok=False, args=args if isinstance(args, dict) else {})
        return valid

    def _fixed(self, tool: BaseTool, args: dict[str, Any], ctx: CallContext,
               moment: datetime | None = None) -> tuple[dict[str, Any], datetime | None]:
        """The arguments with what depends on the moment fixed (ToolMeta.fix_args), and that moment: when the call
        was first asked about (the question is recorded with it), after the ledger knows the call as the work made
        it. "In 20 minutes", approved an hour later or resumed after a restart, still means the time shown."""
        fix = tool_meta(tool).fix_args
        if fix is None:
            return args, None
        if moment is None:
            asked = self.ledger.asked(ctx.key)
            moment = asked[0].asked_at if asked and asked[0].asked_at else datetime.now(timezone.utc)
        return fix(args, moment), moment

    def _replay(self, tool: BaseTool, args: dict[str, Any], effects: list[str], made: str, ctx: CallContext,
                confirm: Confirm) -> _Prepared | CallOutcome | None:
        """A call with effects the ledger has seen: its recorded result, the question whether to run it again (it
        was cut off), or a refusal (the work made another call here before). None: a new call."""
        entry = self.ledger.get(ctx.key) if effects else None
        if entry is None:
            return None
        if entry.requested is not None and entry.requested != made:
            return self._changed(tool, entry, args)
        if entry.status != STARTED:
            return self._replayed(tool, entry)
        return self._in_doubt(tool, entry, ctx, confirm)

    def _site(self, tool: BaseTool, args: dict[str, Any], ctx: CallContext) -> _Site | None:
        """For a browser's tool (ToolMeta.site_scope): the site the call acts on."""
        scope = tool_meta(tool).site_scope
        if scope is None:
            return None
        return _Site(scope, self.sites.target(scope, args, ctx.thread_id, ctx.task))

    def _decide(self, tool: BaseTool, args: dict[str, Any], effects: list[str], ctx: CallContext,
                site: _Site | None) -> autonomy.PolicyDecision:
        """The facts of the call, given to `autonomy.decide`, the one place a mode is decided. Argument provenance
        is what the caller judged (ctx.untrusted_args: the chat graph, when autonomy.argument_provenance is on)."""
        approved, unapproved = False, []
        if site is not None:
            approved = self.sites.allows(site.scope, ctx.thread_id, ctx.task, site.origin, effects)
            if ctx.task is not None and self.sites.shows_unapproved(site.scope, ctx.thread_id, ctx.task, site.origin):
                unapproved = self.sites.unapproved(site.scope, ctx.thread_id, ctx.task)
        return autonomy.decide(
            effects,
            self.settings.autonomy,
            overrides=ctx.overrides,
            untrusted_seen=ctx.untrusted_seen,
            effects_this_turn=ctx.effects_this_turn,
            tool_requires_confirmation=confirmation_demand(tool, args),
            sends_out=sends_out(tool, effects),
            untrusted_args=ctx.untrusted_args,
            site_approved=approved,
            unapproved_sites=unapproved,
            memory_asked=ctx.memory_asked,
        )

    def _confirm(self, tool: BaseTool, args: dict[str, Any], effects: list[str], decision: autonomy.PolicyDecision,
                 made: str, ctx: CallContext, confirm: Confirm, site: _Site | None,
                 moment: datetime | None = None) -> dict[str, Any] | CallOutcome:
        """Ask the user (tools/confirm.settle): the arguments to run, or the denial. A yes to a browser step on a
        site grants that site for the rest of the task (tools/site_grants.py)."""
        name = tool.name
        request = ConfirmationRequest(
            kind="confirm", thread_id=ctx.thread_id, tool=name, args=args, side_effects=effects,
            summary=summarize_call(tool, args), reason=decision.reason, escalated=decision.escalated, key=ctx.key,
            editable=tool_meta(tool).editable,
        )
        granted = site if (site is not None and site.origin is not None and ctx.task is not None
                           and set(effects) <= site.scope.effects) else None
        if granted is not None and granted.origin is not None:
            note = grant_note(granted.origin, self.sites.unapproved(granted.scope, ctx.thread_id, ctx.task))
            request.reason = f"{request.reason}; {note}" if request.reason else note
        answer = settle(request, confirm, self.ledger, made, lambda edited: self.validate_args(tool, edited),
                        asked_at=moment)
        if isinstance(answer, Denied):
            why = f" Reason: {answer.reason}" if answer.reason else ""
            return CallOutcome(name, f"The user denied this call to {name}; it was not run.{why} "
                                     "Do not retry it unless the user asks.", ok=False, args=args)
        # an edit to another site grants nothing
        if granted is not None and self.sites.target(granted.scope, answer, ctx.thread_id, ctx.task) == granted.origin:
            self.sites.grant(granted.scope, ctx.thread_id, ctx.task, granted.origin)
        return answer

    def _record(self, tool: BaseTool, args: dict[str, Any], effects: list[str], made: str, ctx: CallContext,
                confirm: Confirm) -> _Prepared | CallOutcome:
        """An effect is recorded in the ledger before it runs; another process that recorded it in between wins."""
        if effects and not self.ledger.begin(ctx.key, ctx.thread_id, tool.name, args, effects, requested=made):
            entry = self.ledger.get(ctx.key)
            if entry is not None and entry.status != STARTED:
                return self._replayed(tool, entry)
            if entry is not None:
                return self._in_doubt(tool, entry, ctx, confirm)
        return _Prepared(tool, args, effects)

    @staticmethod
    def _changed(tool: BaseTool, entry: Any, args: dict[str, Any]) -> CallOutcome:
        """Work that re-ran (a jorb script, a mission round) makes another call where one was recorded: the
        recorded result is not this call's, and running it would be an effect no one saw asked. It stops here."""
        shown = json.dumps(entry.args, ensure_ascii=False, default=str)[:200]
        return CallOutcome(tool.name, f"Not done: at this point the work made another call before ({entry.tool} with "
                                      f"{shown}), recorded as {entry.status}; it changed between runs, so nothing "
                                      "recorded stands for this call and it was not run. Make the same calls when "
                                      "re-run, or do this in a new step.", ok=False, args=args)

    @staticmethod
    def _replayed(tool: BaseTool, entry: Any) -> CallOutcome:
        """A recorded call: its result again, never a second execution."""
        if entry.status == SKIPPED:
            return CallOutcome(tool.name, entry.result_text or "Skipped.", ok=False, replayed=True, args=entry.args)
        return CallOutcome(tool.name, entry.result_text or "", ok=entry.result_ok, replayed=True, args=entry.args,
                           untrusted=is_untrusted(tool))

    def _in_doubt(self, tool: BaseTool, entry: Any, ctx: CallContext, confirm: Confirm) -> _Prepared | CallOutcome:
        """The call was started and never finished. If its process is alive it is still running; otherwise it
        may have happened, and only the user can say whether to run it again.

        Approval must name the call (`key`): an answer given to an earlier question (the ordinary
        confirmation, replayed after a crash) can never approve a second run by accident."""
        name = tool.name
        if entry.owner_alive and entry.pid != os.getpid():
            return CallOutcome(name, f"{name} is already running for this call in another process (pid {entry.pid}); "
                                     "it was not started again.", ok=False, args=entry.args)
        request = ConfirmationRequest(
            kind="in_doubt", thread_id=ctx.thread_id, tool=name, args=entry.args, side_effects=entry.side_effects,
            summary=summarize_call(tool, entry.args),
            reason=("this call was started earlier but Jarvis stopped before it finished: it may have happened. "
                    "Approve to run it again, or skip it."),
            escalated=False, key=ctx.key,
        )
        while True:
            answer = parse_decision(confirm(request))
            if answer.decision == "approve" and answer.key == ctx.key:
                self.ledger.restart(ctx.key)
                return _Prepared(tool, entry.args, entry.side_effects)
            if answer.decision in ("deny", "skip"):
                note = (f"Skipped {name}: an earlier attempt may already have happened (Jarvis stopped mid-call) and "
                        "the user chose not to run it again.")
                self.ledger.skip(ctx.key, note)
                return CallOutcome(name, note, ok=False, args=entry.args)
            request.error = "to run it again, approve this question itself (its key must be given)"

    def _finish(self, prepared: _Prepared, ctx: CallContext, result: Any, error: str | None, started: float,
                server_text: str | None = None) -> CallOutcome:
        """The result as the model gets it, the ledger completed, the outcome told to the live view."""
        name = prepared.tool.name
        duration = (time.perf_counter() - started) * 1000
        ok = error is None
        untrusted = is_untrusted(prepared.tool, result)
        scope = tool_meta(prepared.tool).site_scope
        if scope is not None:
            content, result = self._seen_on_site(scope, prepared, ctx, result, error, server_text)
        else:
            content = to_text(result) if error is None else error
        if prepared.effects:
            self.ledger.complete(ctx.key, content, ok)
        outcome = CallOutcome(name, content, ok=ok, executed_effect=bool(prepared.effects), untrusted=untrusted,
                              args=prepared.args, duration_ms=duration, raw=result if ok else None)
        if outcome.untrusted:
            self.reads.saw(ctx.thread_id, ctx.task, describe_source(name, prepared.args))
        if ctx.emit:
            ctx.emit({"event": "tool_end", "tool": name, "ok": ok, "duration_ms": round(duration, 1),
                      "preview": content[:300], "key": ctx.key})
        return outcome

    def _seen_on_site(self, scope: SiteScope, prepared: _Prepared, ctx: CallContext, result: Any, error: str | None,
                      server_text: str | None) -> tuple[str, Any]:
        """A browser step's (content, result): the page it shows recorded, its downloads moved, and a site the task
        has not approved withheld (the model gets the note, not its text)."""
        name, ok = prepared.tool.name, error is None
        # read whole: the page's own text can fill the cap and cut off the section naming the page; an error as
        # the server wrote it (ToolError.server_text), not behind the words Jarvis and the provider put first
        if ok:
            whole = result if isinstance(result, str) else to_text(result)
        else:
            whole = server_text if server_text is not None else str(error).removeprefix(f"Error from {name}: ")
        seen = self.sites.saw(scope, ctx.thread_id, ctx.task, whole, ok, prepared.args)
        if ok and scope.collect is not None and isinstance(result, str):
            move = not seen.withheld and not self.sites.unapproved(scope, ctx.thread_id, ctx.task)
            try:
                result = scope.collect(result, ctx.thread_id, ctx.task, move)
            except Exception as exc:  # noqa: BLE001 - the step happened: its result stays, the failure said
                log.warning("the downloads of %s could not be handled: %s", name, exc)
                result = f"{result}\n\n(Note from Jarvis: its downloads could not be moved: {exc})"
        if seen.withheld:
            return seen.note or "", None
        content = self.sites.hide_tabs(scope, ctx.thread_id, ctx.task, to_text(result) if ok else str(error))
        return (f"{content}\n\n{seen.note}" if seen.note else content), result

    @staticmethod
    def _not_run(outcome: CallOutcome, ctx: CallContext) -> None:
        """A call refused before it ran (an unknown tool, bad arguments, denied) is a step too: the live view
        shows it as it happens, as the history does after a reload. A replay is not a new step."""
        if outcome.replayed:
            return
        _record_not_run(outcome)
        if ctx.emit is None:
            return
        ctx.emit({"event": "tool_start", "tool": outcome.tool, "args": outcome.args, "key": ctx.key})
        ctx.emit({"event": "tool_end", "tool": outcome.tool, "ok": outcome.ok, "duration_ms": 0.0,
                  "preview": outcome.content[:300], "key": ctx.key})

    def _start(self, prepared: _Prepared, ctx: CallContext) -> float:
        if ctx.emit:
            ctx.emit({"event": "tool_start", "tool": prepared.tool.name, "args": prepared.args, "key": ctx.key})
        return time.perf_counter()

    @staticmethod
    def _error_text(name: str, exc: BaseException) -> str:
        if isinstance(exc, ToolError):
            return _capped(f"Error from {name}: {secrets.redact(str(exc))}")
        if isinstance(exc, ValidationError):
            return f"Error: bad arguments for {name}: {exc.errors()[0]['msg']}"
        if isinstance(exc, TimeoutError):
            return f"Error: {name} timed out."
        log.warning("tool %s failed", name, exc_info=exc)
        return f"Error: {name} failed: {type(exc).__name__}: {secrets.redact(str(exc))[:500]}"

    # -- the two execution paths -------------------------------------------------------------------
    def execute(self, name: str, args: Any, ctx: CallContext, confirm: Confirm, *,
                tool: BaseTool | None = None) -> CallOutcome:
        """Run a call of the catalog's tool `name` (or of `tool`, an action outside the catalog such as registering a
        generated tool) through the policy, the confirmation and the ledger."""
        prepared = self._prepare(name, args, ctx, confirm, tool)
        if isinstance(prepared, CallOutcome):
            self._not_run(prepared, ctx)
            return prepared
        started = self._start(prepared, ctx)
        config = tool_config(ctx, self.reads.of(ctx.thread_id, ctx.task, ctx.untrusted_seen))
        try:
            tool = prepared.tool
            if getattr(tool, "func", None) is None and getattr(tool, "coroutine", None) is not None:
                from orchestrator.core.aio import run_sync  # async-only tools (MCP) run on the background loop

                result = run_sync(tool.ainvoke(prepared.args, config=config))
            else:
                result = tool.invoke(prepared.args, config=config)
            return self._finish(prepared, ctx, result, None, started)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - any tool failure becomes a ToolMessage, never a crash
            return self._finish(prepared, ctx, None, self._error_text(name, exc), started,
                                server_text=getattr(exc, "server_text", None))
