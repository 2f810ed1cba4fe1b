"""What the chat graph's nodes share (JarvisRuntime), apart from the graph so that the JARB subgraph and the
API can name it without importing graph.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool

from orchestrator.tools.catalog import ToolCatalog
from orchestrator.core.config import Settings
from orchestrator.tools.executor import ToolExecutor
from orchestrator.llm.client import model_config
from orchestrator.memory import MemoryStore
from orchestrator.memory.extraction import Extractor
from .state import ConversationState
from orchestrator.storage.threads import ThreadIndex
from orchestrator.tools.index import FIND_TOOLS, ToolIndex, select_tools


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

    def model_base_url(self) -> str:
        return getattr(self.llm, "openai_api_base", None) or model_config(self.settings, "primary")[1].base_url

    def tools_for_turn(self, state: ConversationState) -> list[BaseTool]:
        """Every tool when they fit in planner.max_bound_tools; otherwise the turn's best matches, the
        recently used ones and find_tools (tool_index.py)."""
        tools = self.catalog.all()
        limit = self.settings.planner.max_bound_tools
        finder = [t for t in tools if t.name == FIND_TOOLS]
        others = [t for t in tools if t.name != FIND_TOOLS]
        if len(others) <= limit:
            return others + self.meta_tools
        human = next((m for m in reversed(state.messages) if isinstance(m, HumanMessage)), None)
        query = human.text if human is not None else ""
        chosen = {t.name for t in select_tools(self.tool_index, others, query, state.recent_tools, limit)}
        # In the catalog's order, not the ranking's: turns that bind the same tools then send the same prompt
        # prefix, which llama.cpp, Ollama and vLLM reuse from their cache instead of reading it again.
        return [t for t in others if t.name in chosen] + finder + self.meta_tools
