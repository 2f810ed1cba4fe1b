"""The tool catalog: every tool Jarvis can call, from every provider (static, MCP, generated).

Providers are asked for their tools each time the catalog is read, so a tool registered by JARB or a
restarted MCP server shows up in the running graph at once (hot loading). A provider that fails is logged
and left out; the others keep working. Tools the user disabled (orchestrator/tool_switches.py) are left out of
`all()`, `names()` and `get()`; `disabled_message(name)` tells the executor what to answer a call to one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from langchain_core.tools import BaseTool

from .config import Settings

log = logging.getLogger(__name__)


class ToolProvider(Protocol):
    name: str

    def list_tools(self) -> list[BaseTool]: ...


class StaticProvider:
    """A fixed list of tools (the hand-written integrations, or tools a caller passes in)."""

    def __init__(self, name: str, tools: Iterable[BaseTool]):
        self.name = name
        self._tools = list(tools)

    def list_tools(self) -> list[BaseTool]:
        return self._tools


class LazyProvider:
    """Builds its tools on first use (integrations that import heavy libraries)."""

    def __init__(self, name: str, build: Callable[[], list[BaseTool]]):
        self.name = name
        self._build = build
        self._tools: list[BaseTool] | None = None
        self._lock = threading.Lock()

    def list_tools(self) -> list[BaseTool]:
        with self._lock:
            if self._tools is None:
                self._tools = self._build()
            return self._tools


class ToolCatalog:
    def __init__(self, providers: Iterable[ToolProvider] = (), switches: Any = None):
        self.providers: list[ToolProvider] = list(providers)
        self.errors: dict[str, str] = {}
        self.switches = switches  # tool_switches.ToolSwitches, or None: nothing can be disabled

    def _disabled(self) -> frozenset[str]:
        return self.switches.disabled() if self.switches is not None else frozenset()

    def disabled_message(self, name: str) -> str | None:
        """What a call to a tool the user disabled gets back (None when `name` is not disabled)."""
        if name not in self._disabled():
            return None
        from .tool_switches import disabled_message

        return disabled_message(name)

    def add_provider(self, provider: ToolProvider) -> None:
        self.providers.append(provider)

    def _tools_by_name(self) -> dict[str, BaseTool]:
        found: dict[str, BaseTool] = {}
        off = self._disabled()
        for provider in self.providers:
            try:
                tools = provider.list_tools()
                self.errors.pop(provider.name, None)
            except Exception as exc:  # noqa: BLE001 - one broken provider must not take the others down
                if self.errors.get(provider.name) != str(exc):
                    log.warning("tool provider %s failed: %s", provider.name, exc)
                self.errors[provider.name] = str(exc)
                continue
            for tool in tools:
                if tool.name in off:
                    continue
                if tool.name in found:
                    log.debug("tool %s from %s shadowed by an earlier provider", tool.name, provider.name)
                    continue
                found[tool.name] = tool
        return found

    def all(self) -> list[BaseTool]:
        return list(self._tools_by_name().values())

    def names(self) -> list[str]:
        return list(self._tools_by_name())

    def get(self, name: str) -> BaseTool | None:
        if name in self._disabled():
            return None
        for provider in self.providers:
            getter = getattr(provider, "get_tool", None)
            try:
                if getter is not None:
                    tool = getter(name)
                    if tool is not None:
                        return tool
                    continue
                for tool in provider.list_tools():
                    if tool.name == name:
                        return tool
            except Exception as exc:  # noqa: BLE001
                self.errors[provider.name] = str(exc)
        return None


def static_tools(settings: Settings) -> list[BaseTool]:
    """The hand-written integrations, configured from settings."""
    from integrations.fs_tools import build_fs_tools
    from integrations.time_tools import build_time_tools

    from .channels.tools import build_message_tools
    from .jorbs.tools import build_jorb_tools
    from .reminders.tools import build_reminder_tools

    tools: list[BaseTool] = []
    tools += build_fs_tools(settings.fs.roots, settings.fs.max_read_bytes, settings.fs.max_search_results)
    tools += build_time_tools(settings.timezone)
    tools += build_message_tools(settings)
    tools += build_jorb_tools(settings)
    tools += build_reminder_tools(settings)
    tools += document_tools(settings)
    tools += google_tools(settings)
    return tools


def _summary_model(settings: Settings):
    """Built on the first summary, not at start: long documents go to the heavy model when one is set."""
    from .llm import make_chat_model

    return lambda: make_chat_model(settings, "heavy", streaming=False)


def document_tools(settings: Settings) -> list[BaseTool]:
    """PDF and YouTube tools. Their heavy libraries (pypdf, youtube-transcript-api) load on first use."""
    from integrations.pdf_tools import build_pdf_tools
    from integrations.yt_tools import build_yt_tools

    from .docs_index import IndexSink, build_docs_tools, docs_index_for

    model = _summary_model(settings)
    pdf, yt = settings.pdf, settings.youtube
    roots = [*settings.fs.roots, settings.data_dir / "uploads"]
    index = docs_index_for(settings)
    sink = IndexSink(index, auto_index=settings.docs.auto_index)  # what the tools read becomes searchable
    return [
        *build_pdf_tools(roots, model, chunk_tokens=pdf.chunk_tokens, max_summary_chunks=pdf.max_summary_chunks,
                         time_budget_s=pdf.time_budget_s, max_extract_chars=pdf.max_extract_chars, sink=sink),
        *build_yt_tools(model, languages=yt.languages, chunk_tokens=yt.chunk_tokens,
                        max_summary_chunks=pdf.max_summary_chunks, timeout_s=yt.timeout_s, sink=sink),
        *build_docs_tools(index, model, budget_tokens=pdf.chunk_tokens),
    ]


def google_tools(settings: Settings) -> list[BaseTool]:
    """Gmail and Calendar; without a stored sign-in each call says to run `jarvis auth google`."""
    from integrations.gcal_tools import build_gcal_tools
    from integrations.gmail_tools import build_gmail_tools

    from .google_auth import google_api

    g = settings.google
    return [
        *build_gmail_tools(google_api(settings, "Gmail", g.gmail_base_url)),
        *build_gcal_tools(google_api(settings, "Google Calendar", g.calendar_base_url), g.calendar_id, settings.timezone),
    ]


def default_catalog(settings: Settings, extra_tools: Iterable[BaseTool] = ()) -> ToolCatalog:
    providers: list[ToolProvider] = []
    extra = list(extra_tools)
    if extra:
        providers.append(StaticProvider("extra", extra))
    static = StaticProvider("static", static_tools(settings))
    providers.append(static)
    from .mcp_tools import mcp_provider  # MCP servers of mcp.dir; they start on first use

    reserved = {t.name for t in extra} | {t.name for t in static.list_tools()}
    mcp = mcp_provider(settings, reserved=lambda: reserved)
    if mcp is not None:
        providers.append(mcp)
    from .jarb_tools import generated_provider  # JARB's tools, read from the registry on each turn

    providers.append(generated_provider(settings))
    from .tool_switches import ToolSwitches

    return ToolCatalog(providers, switches=ToolSwitches(settings))
