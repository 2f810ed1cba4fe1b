"""The composition root: one `App` per process, built from the settings, owns the parts a process shares and hands
them to whoever needs them.

    from orchestrator.app import App
    app = App()                       # config/config.yml; or App(settings, llm=..., checkpointer=...)
    app.graph.invoke(...)             # the chat graph
    app.jorbs.create(...)             # the jorb service; app.android, app.docs_index, app.mcp_manager, app.catalog

Every part is built on first use, once: the chat graph, the jorb service and the phone-task service share one tool
catalog (one MCP manager, one generated-tools provider, one document index), and nothing below this module keeps a
process-wide copy of a service. The tool modules (jorbs, channels, reminders, documents, Google, MCP, JARB) do not
import one another or this module: each takes what it needs as an argument (the jorb tools a function that returns
the jorb service, the MCP provider one that returns the phone-task service), so imports point one way
(docs/ARCHITECTURE.md, the dependency rule). `jarvis run`, every CLI command, the API and the tests build an App.

What spans the chat graph and the jorbs is here too: which graph holds a thread (`graph_for_thread`), what waits
for the user across all threads (`pending`), and re-asking calls a crash cut off (`recover_in_doubt`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.config import Settings, load_settings
from .core.ids import ConversationKind, conversation_of

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool

    from .android.tasks import AndroidTaskService
    from .approvals.notifier import Notifier
    from .approvals.remote import RemoteAnswers
    from .chat.answering import ThreadAnswers
    from .conversations.telegram import TelegramChat
    from .conversations.email import EmailChat
    from .conversations.matrix import MatrixChat
    from .chat.live_turns import TurnHub
    from .chat.runtime import JarvisRuntime
    from .docs_index import DocsIndex
    from .jorbs.service import JorbService
    from .llm.embeddings import Embedder
    from .mcp.manager import McpManager
    from .memory import MemoryStore
    from .memory.extraction import Extractor
    from .reminders.scheduler import Scheduler
    from .tools.catalog import ToolCatalog

# Each part imports what it builds, when it is first built: a command that needs one part (`jarvis memory`, `jarvis
# docs`) does not load LangGraph, the MCP client, the phone tasks and every integration first (importing them all
# took 1.3 s of each such command's 2 s).

log = logging.getLogger(__name__)


class App:
    """A process's parts. `llm`, `checkpointer` and `catalog` replace the defaults (tests, the platform graph);
    `checkpointer=False` compiles the chat graph without one; `tools` are added before the built-in tools."""

    def __init__(self, settings: Settings | None = None, *, llm: BaseChatModel | None = None,
                 checkpointer: Any = None, catalog: ToolCatalog | None = None, tools: Iterable[BaseTool] = (),
                 telemetry: bool = True):
        self.settings = settings or load_settings()
        self._llm = llm
        self._checkpointer = checkpointer
        self._catalog = catalog
        self._extra_tools = list(tools)
        self._telemetry = telemetry
        self._parts: dict[str, Any] = {}
        self._lock = threading.RLock()  # one lock for every part: a part built from others never waits on itself

    def _part(self, name: str, build: Callable[[], Any]) -> Any:
        """Each part is built once, on first use, by whichever thread asks first."""
        with self._lock:
            if name not in self._parts:
                self._parts[name] = build()
            return self._parts[name]

    # -- the parts ----------------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """models.embeddings' client, one for the document index, memory and tool ranking (one endpoint that
        failed is left alone by all three for a while, and said once)."""
        from .llm.embeddings import make_embedder

        return self._part("embedder", lambda: make_embedder(self.settings))

    @property
    def docs_index(self) -> DocsIndex:
        from .docs_index import DocsIndex

        return self._part("docs_index", lambda: DocsIndex(self.settings, self.embedder))

    @property
    def memory(self) -> MemoryStore | None:
        """What Jarvis remembers about the user (None when memory.enabled is false: no tools, nothing read)."""
        from .memory import MemoryStore

        return self._part("memory", lambda: MemoryStore(self.settings, self.embedder)
                          if self.settings.memory.enabled else None)

    @property
    def memory_extractor(self) -> Extractor | None:
        """Proposes facts from finished turns (memory.propose_from_turns); None when off."""
        from .memory.extraction import Extractor

        on = self.memory is not None and self.settings.memory.propose_from_turns
        return self._part("memory_extractor", lambda: Extractor(self.memory) if on else None)

    @property
    def mcp_manager(self) -> McpManager:
        """The MCP servers of mcp.dir, started on first use, shared by the catalog and the phone tasks."""
        from .mcp.manager import McpManager

        return self._part("mcp_manager", lambda: McpManager(self.settings))

    @property
    def catalog(self) -> ToolCatalog:
        """Extra tools, the built-in integrations, the MCP servers' tools, JARB's tools (read from the registry on
        each turn); the user's tool switches apply to all of them."""
        return self._part("catalog", lambda: self._catalog if self._catalog is not None else self._default_catalog())

    def _default_catalog(self) -> ToolCatalog:
        from .jarb.tools import generated_provider
        from .tools.catalog import StaticProvider, ToolCatalog, ToolProvider
        from .tools.switches import ToolSwitches

        providers: list[ToolProvider] = []
        if self._extra_tools:
            providers.append(StaticProvider("extra", self._extra_tools))
        static = StaticProvider("static", self.static_tools())
        providers.append(static)
        reserved = {t.name for t in self._extra_tools} | {t.name for t in static.list_tools()}
        if Path(self.settings.mcp.dir).is_dir():  # no MCP folder: the MCP library (~1 s to import) is not loaded
            from .mcp.provider import mcp_provider

            mcp = mcp_provider(self.settings, manager=self.mcp_manager, reserved=lambda: reserved,
                               android=lambda: self.android)
            if mcp is not None:
                providers.append(mcp)
        providers.append(generated_provider(self.settings, lambda: self.sandbox))
        return ToolCatalog(providers, switches=ToolSwitches(self.settings))

    @property
    def sandbox(self) -> Any:
        """The sandbox of generated tools and jorb scripts (raises SandboxUnavailable with a fix)."""
        from .jarb.tools import make_sandbox

        return self._part("sandbox", lambda: make_sandbox(self.settings))

    @property
    def runtime(self) -> JarvisRuntime:
        """What the chat graph's nodes share: the model, the catalog plus find_tools, the executor, the threads."""
        return self._part("runtime", self._chat_runtime)

    def _chat_runtime(self) -> JarvisRuntime:
        from .chat.jarb_subgraph import create_new_tool_tool
        from .chat.runtime import JarvisRuntime
        from .llm.client import make_chat_model
        from .storage.threads import ThreadIndex
        from .tools.catalog import StaticProvider, ToolCatalog
        from .tools.executor import ToolExecutor
        from .tools.index import ToolIndex, find_tools_tool, tool_embedding

        settings = self.settings
        llm = self._llm if self._llm is not None else make_chat_model(settings, "primary")
        index = ToolIndex(tool_embedding(self.embedder))
        # find_tools searches the tools the model may be given (not those of an integration that is not
        # connected); the chat binds it, the jorbs and phone tasks do not.
        chat_catalog = ToolCatalog(self.catalog.providers, switches=self.catalog.switches)
        chat_catalog.add_provider(StaticProvider("find_tools", [find_tools_tool(index, chat_catalog.offered)]))
        meta_tools = [create_new_tool_tool(settings.jarb.max_repairs)] if settings.jarb.enabled else []
        return JarvisRuntime(settings=settings, llm=llm, catalog=chat_catalog, executor=ToolExecutor(settings, chat_catalog),
                             threads=ThreadIndex(settings), meta_tools=meta_tools, tool_index=index, memory=self.memory,
                            memory_extractor=self.memory_extractor)

    @property
    def graph(self) -> Any:
        """The chat graph, compiled with the persistent checkpointer (or the one given; False: none)."""
        from .chat.graph import compile_chat_graph
        from .storage.engines import make_checkpointer

        def build() -> Any:
            checkpointer = self._checkpointer if self._checkpointer is not None else make_checkpointer(self.settings)
            return compile_chat_graph(self.runtime, checkpointer or None, telemetry=self._telemetry)

        return self._part("graph", build)

    def turn_hub(self, decorate: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> TurnHub:
        """The chat turns running in this process (the web UI's, the phone's answers'), one at a time per thread
        across workers (claims). Built once; `decorate`: the server's additions to events (create_app's)."""
        from .chat.live_turns import TurnHub
        from .storage.claims import Claims

        hub = self._part("turns", lambda: TurnHub(self.graph, claims=Claims(self.settings),
                                                  end_task=self.runtime.end_abandoned_turn))
        if decorate is not None:
            hub.decorate = decorate
        return hub

    @property
    def thread_answers(self) -> ThreadAnswers:
        """The one way an answer to a chat thread's confirmation is applied (the UI, the phone, `jarvis approve`)."""
        from .approvals.store import ApprovalStore
        from .chat.answering import ThreadAnswers

        return self._part("thread_answers", lambda: ThreadAnswers(self.graph, self.turn_hub(),
                                                                  ApprovalStore(self.settings)))

    @property
    def jorbs(self) -> JorbService:
        """The jorb service: its steps call the same catalog as the chat (without find_tools)."""
        from .jorbs.service import JorbService

        return self._part("jorbs", lambda: JorbService(self.settings, catalog=self.catalog))

    @property
    def android(self) -> AndroidTaskService:
        """Phone goals as background tasks over the adb MCP server (its own provider: no wrapper tools)."""
        from .android.tasks import AndroidTaskService
        from .mcp.provider import McpProvider

        return self._part("android", lambda: AndroidTaskService(
            self.settings, McpProvider(self.settings, manager=self.mcp_manager, wrappers=False)))

    def scheduler(self, **kwargs: Any) -> Scheduler:
        """The reminder scheduler, firing into this App's chat graph and jorbs (kwargs go to Scheduler)."""
        from .reminders.scheduler import Scheduler

        if self.settings.backup.every is not None and "jobs" not in kwargs:  # the scheduled backup
            from .backup.schedule import run_if_due

            kwargs["jobs"] = {"backup": lambda: run_if_due(self.settings)}
        return Scheduler(self.settings, graph_factory=lambda: self.graph, wake_jorb=self._wake_jorb, **kwargs)

    def _wake_jorb(self, jorb_id: str, event: Any) -> None:
        """A reminder for a jorb becomes its current event; a jorb that has ended cannot take it (not retried)."""
        from .jorbs.service import JorbError
        from .reminders.targets import DeliveryError

        try:
            self.jorbs.deliver_event(jorb_id, event.model_dump(), background=True)
        except JorbError as exc:
            raise DeliveryError(str(exc), permanent=True) from None

    # -- the tools of the built-in integrations ---------------------------------------------------------------
    def static_tools(self) -> list[BaseTool]:
        from integrations.fs_tools import build_fs_tools
        from integrations.time_tools import build_time_tools
        from .jarb.tools import protected_paths
        from .jorbs.message_tools import build_message_tools
        from .jorbs.schema import JorbStatus
        from .jorbs.store import JorbStore
        from .jorbs.tools import build_jorb_tools
        from .memory import build_memory_tools
        from .reminders.tools import build_reminder_tools
        from .tools.dav_accounts import dav_tools
        from .tools.mail_accounts import mail_tools

        settings = self.settings
        tools: list[BaseTool] = []
        tools += build_fs_tools(settings.fs.roots, settings.fs.max_read_bytes, settings.fs.max_search_results,
                                protected=lambda: protected_paths(settings, for_writes=True))
        tools += build_time_tools(settings.timezone)
        tools += build_message_tools(settings)
        tools += build_jorb_tools(lambda: self.jorbs, self.settings.autonomy)
        tools += build_reminder_tools(settings)
        tools += self.document_tools()
        tools += google_tools(settings)
        tools += mail_tools(settings)
        tools += dav_tools(settings)
        if self.memory is not None:  # an entity may link to a document of the index or a jorb contact
            tools += build_memory_tools(self.memory, known={
                "document": lambda ref: self.docs_index.get(ref) is not None,
                "contact": lambda ref: bool(JorbStore(settings).jorbs_with_contact(ref, statuses=tuple(JorbStatus)))})
        return tools

    def document_tools(self) -> list[BaseTool]:
        """PDF and YouTube tools. Their heavy libraries (pypdf, youtube-transcript-api) load on first use."""
        from integrations.pdf_tools import build_pdf_tools
        from integrations.summarize import checked_model
        from integrations.yt_tools import build_yt_tools
        from .docs_index import IndexSink, build_docs_tools
        from .llm.answer_end import checked_reply
        from .llm.client import make_chat_model

        settings = self.settings
        # Built on the first summary, not at start: long documents go to the heavy model when one is set. An
        # answer cut off (at the token limit, or a closed connection) is refused, not summarized from.
        model = checked_model(lambda: make_chat_model(settings, "heavy", streaming=False),
                              lambda reply, llm: checked_reply(reply, llm, "a summary or an answer from a document"))
        pdf, yt = settings.pdf, settings.youtube
        roots = [*settings.fs.roots, settings.data_dir / "uploads"]
        sink = IndexSink(self.docs_index, auto_index=settings.docs.auto_index)  # what the tools read becomes searchable
        return [
            *build_pdf_tools(roots, model, chunk_tokens=pdf.chunk_tokens, max_summary_chunks=pdf.max_summary_chunks,
                             time_budget_s=pdf.time_budget_s, max_extract_chars=pdf.max_extract_chars, sink=sink),
            *build_yt_tools(model, languages=yt.languages, chunk_tokens=yt.chunk_tokens,
                            max_summary_chunks=pdf.max_summary_chunks, timeout_s=yt.timeout_s, sink=sink),
            *build_docs_tools(self.docs_index, model, budget_tokens=pdf.chunk_tokens),
        ]

    # -- what spans the chat and the jorbs -----------------------------------------------------------------------
    def graph_for_thread(self, thread_id: str) -> Any:
        """Jorb threads (`jorb:<id>`) live in the jorb graph; every other thread in the chat graph."""
        jorb_id = conversation_of(thread_id).jorb_id
        return self.jorbs.graph_for(jorb_id) if jorb_id is not None else self.graph

    def pending(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """Every confirmation waiting in the checkpoints (of one thread, or of all threads that may be waiting),
        chat threads and jorbs alike."""
        from .storage.threads import RUNNING, WAITING, ThreadIndex

        if thread_id:
            return self._with_sent(_confirmations(self.graph_for_thread(thread_id), thread_id))
        items: list[dict[str, Any]] = []
        for info in ThreadIndex(self.settings).list(limit=10_000, statuses=(WAITING, RUNNING)):
            items.extend(_confirmations(self.graph_for_thread(info.thread_id), info.thread_id))
        return self._with_sent(items)

    def _with_sent(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each item says where it was sent to be answered from a phone (`sent`: channel, to, at), and the ref an
        answer to it names."""
        from .approvals.store import ApprovalStore
        from .tools.answers import with_ref

        store = ApprovalStore(self.settings)
        for item in items:
            item["sent"] = store.sent_for(with_ref(item)["ref"])
        return items

    # -- answering from a phone (orchestrator/approvals) --------------------------------------------------------
    def answer_item(self, thread_id: str, interrupt_id: str, answer: str, via: str, ref: str) -> None:
        """Apply an answer given away from the UI (approve or deny) to one pending confirmation, the question
        `ref` names; the jorb's step or the chat turn runs in the background, as the UI's answers do. Raises
        Busy, or an error whose message is told (another surface was first, the question moved on)."""
        from .approvals.remote import Busy
        from .chat.live_turns import TurnBusy
        from .jorbs.service import JorbBusy
        from .tools.answers import resume_values

        jorb_id = conversation_of(thread_id).jorb_id
        try:
            if jorb_id is None:
                given = {interrupt_id: {"answer": answer, "ref": ref}}
                self.thread_answers.apply(thread_id, {interrupt_id}, lambda items: resume_values(items, given), via,
                                          every=False)  # the call it was asked about; the others stay pending
                return
            decide = self.jorbs.approve if answer == "approve" else self.jorbs.reject
            decide(jorb_id, interrupt_id=interrupt_id, ref=ref, wait=False, via=via)
        except (JorbBusy, TurnBusy) as exc:
            raise Busy(f"conversation {thread_id} is busy (a turn runs on it, or `jarvis chat` holds it)"
                       if isinstance(exc, TurnBusy) else str(exc)) from None

    @property
    def remote_answers(self) -> RemoteAnswers:
        """Telegram button presses and email replies -> answers (confirmations.notify)."""
        from .approvals.remote import RemoteAnswers

        return self._part("remote_answers", lambda: RemoteAnswers(self.settings, self.pending, self.answer_item))

    @property
    def telegram_chat(self) -> TelegramChat:
        """The user's own conversation over Telegram (channels.telegram.chat): its turns on this App's TurnHub."""
        from .conversations.telegram import TelegramChat

        return self._part("telegram_chat", lambda: TelegramChat(self.settings, self.turn_hub(),
                                                                self._confirm_in_chat, self.pending))

    @property
    def email_chat(self) -> EmailChat:
        """The user's own conversation by email (channels.email.chat): its turns on this App's TurnHub."""
        from .conversations.email import EmailChat

        return self._part("email_chat", lambda: EmailChat(self.settings, self.turn_hub()))

    @property
    def matrix_chat(self) -> MatrixChat:
        """The user's own conversation over Matrix (channels.matrix): its turns on this App's TurnHub."""
        from .channels.matrix import MatrixAPI
        from .conversations.matrix import MatrixChat

        return self._part("matrix_chat", lambda: MatrixChat(self.settings, self.turn_hub(), self.pending,
                                                            self.remote_answers, MatrixAPI(self.settings)))

    def _confirm_in_chat(self, item: dict[str, Any], chat: str) -> None:
        """A confirmation of the user's Telegram conversation, sent with buttons into that chat at once, and only
        there: marked as sent, so the notifier's sweep does not send it again."""
        notifier = self.notifier()
        ref = notifier.store.ref(item)
        notifier.store.seen(ref)
        if notifier.store.mark_notified(ref):
            notifier.send_telegram(item, chat)

    def notifier(self) -> Notifier:
        """Sends the pending confirmations no UI watches to confirmations.notify.to."""
        from .approvals.notifier import Notifier

        return Notifier(self.settings, self.pending)

    def recover_in_doubt(self, thread_id: str | None = None) -> int:
        """Re-run the tool tasks of chat threads whose ledger holds a call started by a process that died.

        The task runs again from its start: its confirmation was already answered (the answer is in the
        checkpoint), so it reaches the ledger, finds the call started and unfinished, and asks the user whether
        it should run again ("may have happened"). Nothing is executed without that answer. Jorbs recover through
        JorbService.recover (their step is retried as a whole).
        """
        from .tools.ledger import EffectsLedger

        threads = {e.thread_id for e in EffectsLedger(self.settings).in_doubt(thread_id)}
        recovered = 0
        for tid in sorted(threads):
            if conversation_of(tid).kind is ConversationKind.JORB:
                continue
            config = {"configurable": {"thread_id": tid}}
            snapshot = self.graph.get_state(config)
            if not snapshot.next:
                continue
            if any(isinstance(i.value, dict) and i.value.get("kind") == "in_doubt" for i in snapshot.interrupts):
                continue  # already asking
            log.info("thread %s has a call that may have happened; asking the user", tid)
            try:
                self.graph.invoke(None, config)
            except Exception:  # noqa: BLE001 - recovery must not block listing the rest
                log.exception("could not recover thread %s", tid)
                continue
            recovered += 1
        return recovered

    def close(self) -> None:
        """Let background jorb steps finish, stop the MCP servers this App started and write the bookkeeping its
        turns queued (storage/writer.py): a data folder removed after close is not made again by a late write."""
        from .storage import writer

        parts = self._parts
        if "jorbs" in parts:
            parts["jorbs"].wait_background()
        if "mcp_manager" in parts:
            parts["mcp_manager"].shutdown()
        writer.flush()


def _confirmations(graph: Any, thread_id: str) -> list[dict[str, Any]]:
    from .storage.threads import pending_confirmations

    return [p for p in pending_confirmations(graph, thread_id) if p.get("type") == "confirmation"]


def google_tools(settings: Settings) -> list[BaseTool]:
    """Gmail and Calendar; without a stored sign-in they are not offered to the model (ToolMeta `unavailable`,
    asked by the catalog at each planner step: integrations/availability.py), the Tools view says they are not
    connected, and a call made anyway says to run `jarvis auth google`."""
    from integrations.base import with_meta
    from integrations.gcal_tools import build_gcal_tools
    from integrations.gmail_tools import build_gmail_tools
    from .tools.google_auth import google_api, google_availability

    g = settings.google
    tools = [
        *build_gmail_tools(google_api(settings, "Gmail", g.gmail_base_url)),
        *build_gcal_tools(google_api(settings, "Google Calendar", g.calendar_base_url), g.calendar_id, settings.timezone),
    ]
    connected = google_availability(settings)
    return [with_meta(tool, unavailable=connected) for tool in tools]


def build_graph(settings: Settings | None = None, **kwargs: Any) -> Any:
    """The chat graph of a new App (the Python API: `build_graph().invoke(...)`); kwargs go to App."""
    return App(settings, **kwargs).graph
