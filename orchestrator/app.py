"""Assembling a process from the settings: the tools of every integration, the default catalog, the process's
JorbService and Android task service.

The tool modules (jorbs, channels, reminders, documents, Google, MCP, JARB) do not import one another or this
module: each takes what it needs as an argument (the jorb tools a function that returns the JorbService, the MCP
provider one that returns the Android task service). Everything that needs "the tools of this process" or "the
jorb service" comes here, so imports point one way (docs/ARCHITECTURE.md, the dependency rule).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterable
from typing import Any

from langchain_core.tools import BaseTool

from integrations.fs_tools import build_fs_tools
from integrations.gcal_tools import build_gcal_tools
from integrations.gmail_tools import build_gmail_tools
from integrations.pdf_tools import build_pdf_tools
from integrations.time_tools import build_time_tools
from integrations.yt_tools import build_yt_tools

from .android import tasks as android_tasks
from .tools.catalog import StaticProvider, ToolCatalog, ToolProvider
from .channels.tools import build_message_tools
from .core.config import Settings
from .docs_index import IndexSink, build_docs_tools, docs_index_for
from .tools.google_auth import google_api, load_credentials
from .jarb.tools import generated_provider, protected_paths
from .jorbs.service import JorbService
from .jorbs.tools import build_jorb_tools
from .llm.client import make_chat_model
from .mcp.provider import mcp_provider
from .reminders.tools import build_reminder_tools
from .tools.switches import ToolSwitches


def static_tools(settings: Settings) -> list[BaseTool]:
    """The hand-written integrations, configured from settings."""
    tools: list[BaseTool] = []
    tools += build_fs_tools(settings.fs.roots, settings.fs.max_read_bytes, settings.fs.max_search_results,
                            protected=protected_paths(settings))
    tools += build_time_tools(settings.timezone)
    tools += build_message_tools(settings)
    tools += build_jorb_tools(lambda: service_for(settings))
    tools += build_reminder_tools(settings)
    tools += document_tools(settings)
    tools += google_tools(settings)
    return tools


def _summary_model(settings: Settings):
    """Built on the first summary, not at start: long documents go to the heavy model when one is set."""
    return lambda: make_chat_model(settings, "heavy", streaming=False)


def document_tools(settings: Settings) -> list[BaseTool]:
    """PDF and YouTube tools. Their heavy libraries (pypdf, youtube-transcript-api) load on first use."""
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
    """Gmail and Calendar; without a stored sign-in each call says to run `jarvis auth google`, and the Tools
    view says they are not connected (metadata `unavailable`: a callable, asked when the view is drawn)."""
    g = settings.google
    tools = [
        *build_gmail_tools(google_api(settings, "Gmail", g.gmail_base_url)),
        *build_gcal_tools(google_api(settings, "Google Calendar", g.calendar_base_url), g.calendar_id, settings.timezone),
    ]

    def unavailable() -> str | None:
        try:
            signed_in = load_credentials(settings) is not None
        except Exception:  # noqa: BLE001 - no keyring, an unreadable token: not connected either way
            signed_in = False
        return None if signed_in else "Google is not connected: run `jarvis auth google`"

    for tool in tools:
        tool.metadata = {**(tool.metadata or {}), "unavailable": unavailable}
    return tools


def default_catalog(settings: Settings, extra_tools: Iterable[BaseTool] = ()) -> ToolCatalog:
    """extra tools, the static integrations, the MCP servers of mcp.dir (started on first use), JARB's tools
    (read from the registry on each turn); the user's tool switches apply to all of them."""
    providers: list[ToolProvider] = []
    extra = list(extra_tools)
    if extra:
        providers.append(StaticProvider("extra", extra))
    static = StaticProvider("static", static_tools(settings))
    providers.append(static)
    reserved = {t.name for t in extra} | {t.name for t in static.list_tools()}
    mcp = mcp_provider(settings, reserved=lambda: reserved, android=lambda: android_tasks.service_for(settings))
    if mcp is not None:
        providers.append(mcp)
    providers.append(generated_provider(settings))
    return ToolCatalog(providers, switches=ToolSwitches(settings))


def jorb_service(settings: Settings, *, catalog: ToolCatalog | None = None, **kwargs: Any) -> JorbService:
    """A new JorbService over `catalog` (default: the default catalog); kwargs go to JorbService."""
    return JorbService(settings, catalog=catalog if catalog is not None else default_catalog(settings), **kwargs)


_services: dict[int, JorbService] = {}
_guard = threading.Lock()


def service_for(settings: Settings) -> JorbService:
    """One JorbService per process and settings (the chat tool, the server and the scheduler share it)."""
    with _guard:
        svc = _services.get(id(settings))
        if svc is None:
            svc = jorb_service(settings)
            _services[id(settings)] = svc
            atexit.register(svc.wait_background)
        return svc
