"""What the chat graph's nodes share (JarvisRuntime), apart from the graph so that the JARB subgraph and the
API can name it without importing graph.py."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool

from orchestrator.tools.catalog import CatalogView, ToolCatalog
from orchestrator.core.config import Settings
from orchestrator.tools.executor import ToolExecutor
from orchestrator.llm.client import model_config
from orchestrator.llm.server_window import ServerWindows
from orchestrator.memory import MemoryStore
from orchestrator.memory.context import memory_context
from orchestrator.memory.extraction import Extractor
from .context_fit import context_window, schema_tokens
from .planner import openai_schema
from .state import ConversationState
from .tool_binding import TOOL_SHARE, first_found, thread_tools
from orchestrator.storage.threads import ThreadIndex
from orchestrator.tools.index import FIND_TOOLS, ToolIndex, ToolSearch, found_on_last_step, select_tools


REMEMBERED_THREADS = 64  # threads whose turn's memory block is kept (threads running at once, with room)


@dataclass(frozen=True, eq=False)
class PlannerTools:
    """What the planner looks up in one catalog view (tools/catalog.CatalogView) at every step, made once per view:
    at a thousand tools, making these again at each step was most of what a thousand tools cost a turn."""

    view: CatalogView
    finder: list[BaseTool]  # find_tools, when the catalog has it
    others: list[BaseTool]  # every other tool, in the catalog's order
    position: dict[str, int]  # a name's place in `others`
    search: ToolSearch  # `others` as the search index takes them: their fingerprint, and by name

    @classmethod
    def of(cls, view: CatalogView) -> PlannerTools:
        """The view's offered tools only: one whose integration is not connected is never given to the model."""
        finder = [t for t in view.offered if t.name == FIND_TOOLS]
        others = [t for t in view.offered if t.name != FIND_TOOLS]
        return cls(view, finder, others, {t.name: i for i, t in enumerate(others)},
                   ToolSearch(ToolIndex.fingerprint(others), {t.name: t for t in others}))


@dataclass
class JarvisRuntime:
    """What the nodes share: settings, the model, the tool catalog and the executor."""

    settings: Settings
    llm: BaseChatModel
    catalog: ToolCatalog
    executor: ToolExecutor
    threads: ThreadIndex
    meta_tools: list[BaseTool] = field(default_factory=list)
    tool_index: ToolIndex = field(default_factory=ToolIndex)
    memory: MemoryStore | None = None  # read before each planner step (memory.context), None: no memory
    memory_extractor: Extractor | None = None  # proposes facts after a turn (memory.propose_from_turns)
    windows: ServerWindows = field(default_factory=ServerWindows)  # what the model servers say their windows are

    def __post_init__(self) -> None:
        self._planner_view: PlannerTools | None = None
        self._remembered: OrderedDict[str, tuple[tuple[int, str], str | None]] = OrderedDict()
        self._remembered_lock = threading.Lock()

    def end_abandoned_turn(self, thread_id: str) -> None:
        """A turn stopped or failed (it never reached `respond`): the thread is idle again, not left "running",
        and its task ends (its site approvals, the browser it drove)."""
        from orchestrator.storage.threads import IDLE

        self.threads.set_status_later(thread_id, IDLE)
        self.executor.sites.end_task(thread_id)

    def remembered(self, thread_id: str, turn: int, message: str) -> str | None:
        """The memory block of a turn (memory/context.py), read at its first planner step: the steps after its tool
        calls reuse it, so a turn reads memory once, not once per step; a fact remembered during the turn is in that
        call's result and in the next turn's block."""
        if self.memory is None:
            return None
        key = (turn, message)
        with self._remembered_lock:
            found = self._remembered.get(thread_id)
            if found is not None and found[0] == key:
                return found[1]
        block = memory_context(self.memory, message, self.settings.memory)
        with self._remembered_lock:
            self._remembered[thread_id] = (key, block)
            self._remembered.move_to_end(thread_id)
            while len(self._remembered) > REMEMBERED_THREADS:
                self._remembered.popitem(last=False)
        return block

    def model_base_url(self) -> str:
        return getattr(self.llm, "openai_api_base", None) or model_config(self.settings, "primary")[1].base_url

    def _planner_tools(self) -> PlannerTools:
        view = self.catalog.view()
        known = self._planner_view
        if known is None or known.view is not view:
            known = self._planner_view = PlannerTools.of(view)
        return known

    def tools_for_turn(self, state: ConversationState) -> list[BaseTool]:
        """Every tool when they are no more than planner.max_thread_tools and fit the model's window; otherwise
        the tools the thread has bound so far plus the request's best matches (planner.max_bound_tools of them: the
        recently used ones and the best ranked) and find_tools (tool_binding.py, tools/index.py)."""
        catalog = self._planner_tools()
        others, finder = catalog.others, catalog.finder
        limit = self.settings.planner.max_bound_tools
        window, _ = context_window(self.settings, self.windows)
        budget = int(window * TOOL_SHARE)

        def fits(bound: list[BaseTool], extra: list[BaseTool] = finder) -> bool:
            return schema_tokens(self.settings, [openai_schema(t) for t in [*bound, *extra, *self.meta_tools]]) <= budget

        cap = max(limit, self.settings.planner.max_thread_tools or 3 * limit)
        if len(others) <= cap and fits(others, []):
            return others + self.meta_tools  # the same every turn: the best case for a server's prefix cache
        human = next((m for m in reversed(state.messages) if isinstance(m, HumanMessage)), None)
        query = human.text if human is not None else ""
        chosen = select_tools(self.tool_index, others, query, state.recent_tools, limit, catalog.search)
        if len(others) <= limit:  # all of them, which did not fit the window: the best first, so the rest go
            best = select_tools(self.tool_index, others, query, state.recent_tools, max(1, len(others) - 1),
                                catalog.search)
            chosen = best + [t for t in others if t.name not in {b.name for b in best}]
        found = found_on_last_step(state.messages)  # all of them on this step, as find_tools promised
        if found:
            chosen = first_found(catalog.search.by_name, chosen, found)
            cap = max(cap, len(found))
        return thread_tools(catalog.position, others, chosen, state.bound_tools, cap, fits) + finder + self.meta_tools
