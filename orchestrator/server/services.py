"""Background services that `jarvis run` starts next to the web UI: the hook for the scheduler, inbound
message routing, watchers...

Adding a service (e.g. the reminder scheduler):

    # orchestrator/scheduler/service.py
    from orchestrator.server.services import ThreadService

    def make_service(settings):                    # called once by `jarvis run`
        if not settings.scheduler.enabled:
            return None                              # None: not started (shown as "disabled")
        def loop(ctx, stop):                         # runs in its own thread until stop is set
            while not stop.wait(ctx.settings.scheduler.tick_s):
                fire_due_reminders(ctx)              # ctx.graph, ctx.turns.start(thread_id, input) ...
        return ThreadService("scheduler", loop)

and add "orchestrator.scheduler.service:make_service" to SERVICE_FACTORIES below. Any object with a `name` and
`async start(ctx)` / `async stop()` works too (an asyncio service). Services start in list order after the
server is ready and stop in reverse order on shutdown; one that fails to start is logged and reported in the
Settings view, and the others keep running. Turns a service starts through `ctx.turns` appear live in the UI.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrator.channels.email import email_poller
from orchestrator.approvals.remote import own_account_problem
from orchestrator.channels.telegram import TelegramPoller
from orchestrator.chat.warm_up import wants_warm_up, warm_up
from orchestrator.core.config import Settings
from orchestrator.storage.engines import is_postgres

log = logging.getLogger(__name__)

# "module:callable" factories; each callable takes Settings and returns a service or None (disabled).
SERVICE_FACTORIES: list[str] = [
    "orchestrator.server.services:model_warm_up_service",
    "orchestrator.server.services:recover_in_doubt_service",
    "orchestrator.server.services:reminder_scheduler_service",
    "orchestrator.server.services:telegram_inbound_service",
    "orchestrator.server.services:email_inbound_service",
    "orchestrator.server.services:matrix_inbound_service",
    "orchestrator.server.services:jorbs_recover_service",
    "orchestrator.server.services:approvals_notify_service",
]


@dataclass
class ServiceContext:
    app: Any  # orchestrator.app.App: the process's parts (graph, jorbs, ...)
    turns: Any  # orchestrator.chat.live_turns.TurnHub: start turns that the UI shows live
    extras: dict[str, Any] = field(default_factory=dict)  # shared objects services want to publish

    @property
    def settings(self) -> Settings:
        return self.app.settings

    @property
    def graph(self) -> Any:
        return self.app.graph


class BackgroundService(Protocol):
    name: str

    async def start(self, ctx: ServiceContext) -> None: ...

    async def stop(self) -> None: ...


class ThreadService:
    """A blocking loop in a daemon thread: `target(ctx, stop_event)` returns when stop_event is set."""

    def __init__(self, name: str, target: Callable[[ServiceContext, threading.Event], None], join_timeout_s: float = 5.0):
        self.name = name
        self.target = target
        self.join_timeout_s = join_timeout_s
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self.error: str | None = None

    async def start(self, ctx: ServiceContext) -> None:
        def run() -> None:
            try:
                self.target(ctx, self.stop_event)
            except Exception as exc:  # noqa: BLE001 - reported in Settings, never takes the server down
                self.error = f"{type(exc).__name__}: {exc}"
                log.exception("background service %s stopped with an error", self.name)

        self.thread = threading.Thread(target=run, name=f"service-{self.name}", daemon=True)
        self.thread.start()

    async def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            await asyncio.to_thread(self.thread.join, self.join_timeout_s)


@dataclass
class ServiceStatus:
    name: str
    state: str  # running, finished, failed, disabled, stopped
    detail: str | None = None


class ServiceManager:
    def __init__(self, factories: list[str] | None = None):
        self.factories = list(SERVICE_FACTORIES if factories is None else factories)
        self.services: list[Any] = []
        self.statuses: dict[str, ServiceStatus] = {}

    async def start_all(self, ctx: ServiceContext) -> None:
        for spec in self.factories:
            try:
                module_name, _, attr = spec.partition(":")
                factory = getattr(importlib.import_module(module_name), attr)
                service = factory(ctx.settings)
            except Exception as exc:  # noqa: BLE001
                log.exception("background service %s could not be created", spec)
                self.statuses[spec] = ServiceStatus(spec, "failed", f"{type(exc).__name__}: {exc}")
                continue
            if service is None:
                self.statuses[spec] = ServiceStatus(spec, "disabled", "turned off in the configuration")
                continue
            try:
                await service.start(ctx)
            except Exception as exc:  # noqa: BLE001
                log.exception("background service %s failed to start", service.name)
                self.statuses[service.name] = ServiceStatus(service.name, "failed", f"{type(exc).__name__}: {exc}")
                continue
            self.services.append(service)
            self.statuses[service.name] = ServiceStatus(service.name, "running")

    async def stop_all(self) -> None:
        for service in reversed(self.services):
            try:
                await service.stop()
                self.statuses[service.name] = ServiceStatus(service.name, "stopped")
            except Exception:  # noqa: BLE001
                log.exception("background service %s did not stop cleanly", service.name)
        self.services.clear()

    def report(self) -> list[dict[str, Any]]:
        out = []
        for status in self.statuses.values():
            state, detail = status.state, status.detail
            service = next((s for s in self.services if s.name == status.name), None)
            if isinstance(service, ThreadService) and state == "running":
                if service.error:
                    state, detail = "failed", service.error
                elif service.thread is not None and not service.thread.is_alive():
                    state = "finished"
            elif service is not None and state == "running" and hasattr(service, "detail"):
                detail = service.detail()  # e.g. the last error of a poller that keeps retrying
            out.append({"name": status.name, "state": state, "detail": detail})
        return out


# -- built-in services -----------------------------------------------------------------------------------

def recover_in_doubt_service(settings: Settings) -> ThreadService:
    """Once at start: threads whose side effect was cut off by a crash ask the user (shown in the UI)."""

    def run(ctx: ServiceContext, stop: threading.Event) -> None:
        count = ctx.app.recover_in_doubt()
        if count:
            log.info("%d thread(s) have a call that may have happened; they wait for the user", count)

    return ThreadService("recover-in-doubt", run)


class _StartStop:
    """Adapts an object with blocking start()/stop() (the scheduler, pollers) to a BackgroundService."""

    def __init__(self, name: str, start: Callable[[ServiceContext], Any], detail: Callable[[Any], str | None] | None = None):
        self.name = name
        self._start = start
        self._detail = detail
        self.running: Any = None

    async def start(self, ctx: ServiceContext) -> None:
        self.running = await asyncio.to_thread(self._start, ctx)

    async def stop(self) -> None:
        if self.running is not None:
            await asyncio.to_thread(self.running.stop)

    def detail(self) -> str | None:
        return self._detail(self.running) if self._detail and self.running is not None else None


def model_warm_up_service(settings: Settings) -> ThreadService | None:
    """Starts the built-in model and has it read the planner's system text, once (chat/warm_up.py). A failure is
    shown in the Settings view; the first message then starts the model again and says what is wrong."""
    if not wants_warm_up(settings):
        return None

    def once(ctx: ServiceContext, stop: threading.Event) -> None:
        log.info("%s", warm_up(ctx.app))

    return ThreadService("model-warm-up", once)


def reminder_scheduler_service(settings: Settings) -> _StartStop | None:
    """Fires due reminders (orchestrator/reminders) into agents, webhooks, jorbs and chat threads."""
    if not settings.scheduler.enabled:
        return None

    def start(ctx: ServiceContext) -> Any:
        scheduler = ctx.app.scheduler()
        scheduler.start()
        return scheduler

    return _StartStop("reminder-scheduler", start)


def telegram_inbound_service(settings: Settings) -> _StartStop | None:
    """Long-polls Telegram: the user's own messages are their conversation with Jarvis (conversations/telegram.py),
    the others go to their jorb, or to the inbox."""
    if not settings.channels.telegram.enabled:
        return None

    def start(ctx: ServiceContext) -> Any:
        jorbs = ctx.app.jorbs
        # A burst of messages wakes a jorb once (debounce); the jorb's step runs off the poller's thread.
        deliver = lambda message: jorbs.inbound(message, background=True, debounce=True)  # noqa: E731
        # Approve / Deny presses on confirmations sent to the principal (confirmations.notify) come in here too.
        chat = ctx.settings.channels.telegram.chat
        presses = (ctx.app.remote_answers.on_callback if chat or "telegram" in ctx.settings.confirmations.notify.to
                   else None)
        if chat:  # a turn a killed process left unfinished is told to the user, once
            ctx.app.telegram_chat.recover()
        return TelegramPoller(ctx.settings, deliver, on_callback=presses,
                              converse=ctx.app.telegram_chat.take if chat else None).start()

    return _StartStop("telegram-inbound", start, detail=lambda poller: poller.status_note())


def matrix_inbound_service(settings: Settings) -> _StartStop | None:
    """Syncs the Matrix bot account: the user's invites are joined and their messages are their conversation with
    Jarvis (conversations/matrix.py); anyone else's invite is declined; a reply in a direct room a jorb wrote in,
    from the person it wrote to, goes to that jorb (channels/matrix_send.py)."""
    if not settings.channels.matrix.enabled:
        return None

    def start(ctx: ServiceContext) -> Any:
        from orchestrator.channels.matrix import MatrixPoller

        chat = ctx.app.matrix_chat
        chat.recover()  # a turn a killed process left unfinished is told to the user, once
        jorbs = ctx.app.jorbs
        # a reply in a direct room a jorb wrote in wakes it once per burst, off the sync loop's thread
        deliver = lambda message: jorbs.inbound(message, background=True, debounce=True)  # noqa: E731
        return MatrixPoller(ctx.settings, chat, chat.api, deliver=deliver).start()

    return _StartStop("matrix-inbound", start, detail=lambda poller: poller.status_note())


def email_inbound_service(settings: Settings) -> _StartStop | None:
    """Polls the Gmail threads open jorbs wrote in and routes each reply to its jorb; with channels.email.chat,
    the user's own mail too (conversations/email.py)."""
    if not settings.channels.email.enabled:
        return None

    def start(ctx: ServiceContext) -> Any:
        jorbs = ctx.app.jorbs
        deliver = lambda message: jorbs.inbound(message, background=True, debounce=True)  # noqa: E731
        converse = ctx.app.email_chat.take if ctx.settings.channels.email.chat else None
        if converse is not None:  # a turn a killed process left unfinished is told to the user, once
            ctx.app.email_chat.recover()
        return email_poller(ctx.settings, deliver, lambda: jorbs.store.open_threads("email"), converse=converse).start()

    return _StartStop("email-inbound", start, detail=lambda poller: poller.last_error)


def jorbs_recover_service(settings: Settings) -> ThreadService:
    """At start: jorbs a dead worker left mid-step retry that step (executed side effects are not repeated). Then
    every jorbs.sweep_interval_s: jorbs whose model was down try again once their retry is due (jorbs/retry.py);
    with several workers (storage.url), also jorbs of a worker that died on another machine (once its claims' lease
    ends), and jorbs whose reply came in while another worker held them."""

    def run(ctx: ServiceContext, stop: threading.Event) -> None:
        jorbs = ctx.app.jorbs
        resumed = jorbs.recover()
        if resumed:
            log.info("resumed %d jorbs after the restart: %s", len(resumed), ", ".join(resumed))
        # one worker: a reply that comes in while its jorb runs is taken when the run ends (service.run)
        several = is_postgres(ctx.settings)
        while not stop.wait(ctx.settings.jorbs.sweep_interval_s):
            try:
                woken = jorbs.recover() if several else []
                retried = jorbs.retry_due()
            except Exception as exc:  # noqa: BLE001 - the next sweep tries again
                log.warning("jorb sweep failed: %s", exc)
                continue
            if woken:
                log.info("resumed %d jorbs: %s", len(woken), ", ".join(woken))
            if retried:
                log.info("tried the model again for %d jorbs: %s", len(retried), ", ".join(retried))

    return ThreadService("jorbs-recover", run)


def approvals_notify_service(settings: Settings) -> ThreadService | None:
    """confirmations.notify: every check_s, confirmations (jorbs' and chat threads') no UI has watched for after_s
    go to the principal's Telegram and / or email (orchestrator/approvals); email answers are polled here
    (Telegram presses come with the Telegram poller)."""
    notify = settings.confirmations.notify
    if not notify.to:
        return None
    if "telegram" in notify.to and not settings.channels.telegram.enabled:
        raise ValueError("confirmations.notify.to has telegram, but channels.telegram is not enabled: enable it "
                         "(its poller takes the button presses)")

    def run(ctx: ServiceContext, stop: threading.Event) -> None:
        notifier = ctx.app.notifier()
        remote = ctx.app.remote_answers
        replies = email_poller(ctx.settings, remote.on_email, remote.email_threads) if "email" in notify.to else None
        account_checked = replies is None
        watching = hasattr(replies, "idles")  # an IMAP account: IDLE brings answers in seconds (channels/email_imap)
        if watching:
            replies.start(interval=notify.check_s)
        try:
            _approvals_rounds(ctx, stop, notifier, None if watching else replies, replies, account_checked)
        finally:
            if watching:
                replies.stop()

    return ThreadService("approvals-notify", run)


def _approvals_rounds(ctx: ServiceContext, stop: threading.Event, notifier: Any, polled: Any, replies: Any,
                      account_checked: bool) -> None:
    """Every check_s: confirmations sent where nobody watched; `polled`: the Gmail poller read in the same round
    (None when an IMAP account's poller watches by itself)."""
    notify = ctx.settings.confirmations.notify
    while not stop.wait(notify.check_s):
        if not account_checked:
            try:
                problem = own_account_problem(replies.me(), notify.email)
            except Exception as exc:  # noqa: BLE001 - Gmail unreachable now: asked again next round
                log.info("approvals: the Gmail account could not be read yet: %s", exc)
            else:
                account_checked = True
                if problem:
                    raise ValueError(problem)  # the service stops, and Settings and `jarvis doctor` say why
        for job in (notifier.sweep, polled.poll_once if polled else None):
            if job is None:
                continue
            try:
                job()
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("approvals: %s failed: %s", getattr(job, "__name__", job), exc)

