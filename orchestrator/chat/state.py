"""The one typed state every node of the chat graph reads and writes."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field, GetCoreSchemaHandler
from pydantic_core import core_schema


class Attachment(BaseModel):
    """A file or URL the user handed over with a message; the planner sees the list. `typed`: the user typed its
    path in the message (chat/graph.py detect_attachments); a file handed over otherwise (dropped on the web UI,
    `--attach`) has a name whoever made the file chose, which is outside content (names_outside)."""

    kind: Literal["file", "pdf", "text", "url", "youtube"]
    ref: str
    name: str | None = None
    typed: bool = False


def names_outside(attachments: list[Attachment]) -> bool:
    """Whether the attachments the planner is shown name a file the user did not name in their own words: its
    name (and the path that holds it) is then in the prompt, and the turn counts as having read outside content.
    A URL is the user's own: they pasted it."""
    return any(a.kind not in ("url", "youtube") and not a.typed for a in attachments)


class TurnCount(BaseModel):
    """Side effects executed in the current turn. Parallel tool tasks each add 1; a new turn resets."""

    turn: int = 0
    count: int = 0


def merge_turn_count(old: TurnCount | dict | None, new: TurnCount | dict | None) -> TurnCount:
    # A checkpointer whose serializer does not know Jarvis's types (LangGraph's own server with
    # LANGGRAPH_STRICT_MSGPACK) hands the stored value back as a dict.
    old = TurnCount.model_validate(old) if isinstance(old, dict) else old
    new = TurnCount.model_validate(new) if isinstance(new, dict) else new
    if old is None:
        return new or TurnCount()
    if new is None:
        return old
    if new.turn > old.turn:
        return new
    if new.turn < old.turn:
        return old
    return TurnCount(turn=old.turn, count=old.count + new.count)


def keep_max(old: int, new: int) -> int:
    return max(old, new)


class TurnMark(int):
    """The turn a taint or trust mark names; -1, "no turn", when none was set. LangGraph starts a channel that has a
    reducer at its type's empty value (`int()`, 0), never at the field's default: with plain ints a new thread read
    untrusted_turn 0 and trusted_after_turn 0, so a mark naming turn 0 (a thread tainted before its first turn runs,
    as a call an MCP client hands over is) equalled the trust mark and the thread read as trusted. With this type
    the empty value is -1, the default every reader assumes, and any mark, turn 0 included, taints."""

    def __new__(cls, value: int = -1) -> TurnMark:
        return super().__new__(cls, value)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.int_schema())


def merge_recent(old: list[str], new: list[str]) -> list[str]:
    """Names of tools used recently in the thread, most recent last, at most 20."""
    merged = [n for n in old if n not in new] + [n for n in dict.fromkeys(new)]
    return merged[-20:]


class JarbStage(StrEnum):
    """Where a tool-generation request stands (chat/jarb_subgraph.py). Its value is what a checkpoint stores, so a
    task checkpointed while the stage was a bare string loads as the same stage."""

    SPEC_TO_CODE = "spec_to_code"
    GENERATE_TESTS = "generate_tests"
    RUN_TESTS = "run_tests"
    REPAIR = "repair"
    REGISTER = "register"
    REGISTERED = "registered"
    FAILED = "failed"


class JarbTask(BaseModel):
    """Intermediate artifacts of one tool-generation request (see jarb_subgraph)."""

    tool_call_id: str
    spec: dict[str, Any]
    stage: JarbStage = JarbStage.SPEC_TO_CODE
    attempt: int = 0
    module_path: str | None = None
    tests_path: str | None = None
    code: str | None = None
    tests: str | None = None
    test_output: str | None = None
    passed: bool = False
    error: str | None = None
    registered_name: str | None = None
    # where the request came from (graph.route) and what happened on the way (jarb_subgraph)
    message_id: str | None = None
    index: int = 0
    turn: int = 0
    untrusted: bool = False
    report: dict[str, Any] | None = None
    history: list[str] = Field(default_factory=list)
    registered_version: int | None = None
    failed_dir: str | None = None


class ConversationState(BaseModel):
    messages: Annotated[list[AnyMessage], add_messages] = Field(default_factory=list)
    attachments: list[Attachment] = Field(default_factory=list)
    turn: int = 0
    turn_steps: int = 0
    # The last turn in which output of an untrusted_output tool was read (escalation, see autonomy.py). It stays in
    # what the model sees (the history, or its summary) for the rest of the thread: the thread stays tainted until
    # the user clears it (`jarvis threads trust`), which sets trusted_after_turn.
    untrusted_turn: Annotated[TurnMark, keep_max] = TurnMark()
    trusted_after_turn: Annotated[TurnMark, keep_max] = TurnMark()
    effects: Annotated[TurnCount, merge_turn_count] = Field(default_factory=TurnCount)
    recent_tools: Annotated[list[str], merge_recent] = Field(default_factory=list)
    bound_tools: list[str] = Field(default_factory=list)  # the planner's tools last step, kept (chat/tool_binding.py)
    summary: str | None = None
    summarized_count: int = 0  # messages folded into the summary and moved to the archive
    stop_reason: str | None = None


class RouteChannels(TypedDict, total=False):
    """What graph.route reads of the state, as LangGraph hands it over: a dict of these channels, without those
    never written (a thread whose state was set with update_state, say). Given the whole state, LangGraph validated
    every message into a ConversationState before each routing, for six fields."""

    messages: list[AnyMessage]
    stop_reason: str | None
    turn: int
    untrusted_turn: int
    trusted_after_turn: int
    effects: TurnCount


class RouteView(TypedDict):
    """The channels graph.route reads, every one present (route_view)."""

    messages: list[AnyMessage]
    stop_reason: str | None
    turn: int
    untrusted_turn: int
    trusted_after_turn: int
    effects: TurnCount


def route_view(state: RouteChannels) -> RouteView:
    """The channels graph.route reads, with the state's defaults for those never written."""
    return {**_ROUTE_DEFAULTS, **state}


class CallOrigin(TypedDict):
    """What every call of one planner message carries to its task (graph.route): the message, the turn, and what
    the thread had read and done so far."""

    message_id: str | None
    turn: int
    untrusted_turn: int
    trusted_after_turn: int
    effects: TurnCount
    memory_asked: bool | None  # the turn's user message asked to remember or forget (memory/asked.py)


class ToolTask(BaseModel):
    """The input of one tool_node task: one tool call of the planner's last message (see graph.route)."""

    call: dict[str, Any]
    message_id: str | None = None
    index: int = 0
    turn: int = 0
    untrusted_turn: int = -1
    trusted_after_turn: int = -1
    effects: TurnCount = Field(default_factory=TurnCount)
    invalid_error: str | None = None
    refused: str | None = None  # not run: the model is told why (chat/answer_bounds.py)
    untrusted_args: list[str] | None = None  # argument provenance of this call (tools/provenance.py), None: not judged
    memory_asked: bool | None = None  # the turn's user message asked to remember or forget (memory/asked.py)


def tainted(untrusted_turn: int, trusted_after_turn: int = -1) -> bool:
    """Whether content from outside the conversation is still in what the model sees: read in any turn of the
    thread so far, and not cleared by the user since. Clearing marks the latest such turn (`jarvis threads trust`,
    the UI's trust button: trusted_after_turn = untrusted_turn), never a later one: a mark past it was not the
    user's (a state update through LangGraph's server naming turn 99 would have trusted every read up to it), and
    counts for nothing."""
    return untrusted_turn >= 0 and untrusted_turn != trusted_after_turn


_EMPTY = ConversationState()
_ROUTE_DEFAULTS = RouteView(messages=_EMPTY.messages, stop_reason=_EMPTY.stop_reason, turn=_EMPTY.turn,
                            untrusted_turn=_EMPTY.untrusted_turn, trusted_after_turn=_EMPTY.trusted_after_turn,
                            effects=_EMPTY.effects)
