"""`jarvis chat`: talk to Jarvis in the terminal; tool steps are shown as they happen, confirmations asked inline."""

from __future__ import annotations

import signal
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer

from orchestrator.cli import EXIT_FAILURE, EXIT_PENDING, fail, say, state
from .questions import can_ask
from .turn_display import TurnPrinter, ask_answer, print_pending_help


def ask_decision(c: dict[str, Any]) -> dict[str, Any]:
    """The resume value of the answer asked on the terminal (ask_answer)."""
    from orchestrator.tools.answers import resume_value

    answer, args, note = ask_answer(c)
    return resume_value(c, answer, args=args, note=note)


@contextmanager
def ctrl_c_stops(stop: threading.Event) -> Iterator[None]:
    """The first Ctrl-C during a turn stops the turn, as Stop does in the web UI (the thread stays whole); a
    second one interrupts Jarvis itself."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_ctrl_c(signum: int, frame: Any) -> None:
        if stop.is_set():
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        stop.set()
        say("\n(stopping this turn; Ctrl-C again to quit)", err=True, dim=True)

    signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_turn(graph: Any, thread_id: str, graph_input: Any, *, interactive: bool,
             end_task: Callable[[str], Any] | None = None) -> int:
    """Stream a turn to the terminal, asking confirmations inline when possible. Returns the exit code.
    `end_task`: the executor's `sites.end_task`, run when the turn is stopped or fails (chat/turns.py)."""
    stop = threading.Event()
    with ctrl_c_stops(stop):
        return _run_turn(graph, thread_id, graph_input, interactive=interactive, stop=stop, end_task=end_task)


def _run_turn(graph: Any, thread_id: str, graph_input: Any, *, interactive: bool, stop: threading.Event,
              end_task: Callable[[str], Any] | None) -> int:
    from orchestrator.chat.turns import STOPPED_TEXT, resume_command, stream_turn

    while True:
        printer = TurnPrinter(STOPPED_TEXT)
        for ev in stream_turn(graph, thread_id, graph_input, stop=stop, end_task=end_task):
            code = printer.show(ev)
            if code is not None:
                return code
        if not printer.pending:
            return 0
        printer.end_line()
        if not interactive:
            print_pending_help(thread_id, printer.pending)
            return EXIT_PENDING
        decisions = {c["interrupt_id"]: ask_decision(c) for c in printer.pending}
        graph_input = resume_command(decisions)


def claimed_turn(settings: Any, graph: Any, thread_id: str, graph_input: Any, *, interactive: bool,
                 end_task: Callable[[str], Any] | None = None) -> int:
    """run_turn while this process holds the thread's claim, so the UI or another `jarvis chat` (on this machine
    or, with a shared database, another one) cannot run a turn on the same thread at the same time."""
    from orchestrator.storage.claims import ClaimBusy, Claims

    try:
        with Claims(settings).held(thread_id):
            return run_turn(graph, thread_id, graph_input, interactive=interactive, end_task=end_task)
    except ClaimBusy as busy:
        say(f"error: thread {thread_id} is running a turn in {busy.holder or 'another worker'} (the web UI or another "
            "`jarvis chat`). Wait for it to finish and try again, or start a new thread.",
            err=True, fg=typer.colors.RED)
        return EXIT_FAILURE


def register(app: typer.Typer) -> None:
    @app.command()
    def chat(
        ctx: typer.Context,
        message: list[str] = typer.Argument(None, help="send one message and print the answer; omit for a prompt loop"),
        thread: str = typer.Option(None, "--thread", "-t", help="continue this thread (default: a new one)"),
        attach: list[str] = typer.Option(None, "--attach", "-a", help="a file or URL to attach (repeatable)"),
        audio: str = typer.Option(None, "--audio", help="a recorded question (webm, ogg, wav, mp3...): sent as "
                                  "the message"),
        voice: bool = typer.Option(False, "--voice", help="ask with the microphone (Enter ends each question) and "
                                   "hear the answers; confirmations are still typed"),
    ) -> None:
        """Chat with Jarvis in the terminal (through `jarvis run` when it serves the same data folder)."""
        st = state(ctx)
        if audio and message:
            fail("give the question as MESSAGE or as --audio FILE, not both")
        if message and not (attach or audio or voice):
            code = _through_running_jarvis(st.settings, thread, " ".join(message))
            if code is not None:
                raise typer.Exit(code)
        from orchestrator.chat.turns import user_input
        from orchestrator.cli import voice_cmd

        microphone = None
        if voice:
            if message or audio:
                fail("--voice asks with the microphone; it does not take MESSAGE or --audio")
            microphone = voice_cmd.find_microphone()
            if microphone is None:
                fail("no microphone found (ffmpeg could open none of: "
                     + ", ".join(f"{f} {d}" for f, d in voice_cmd.MICROPHONES)
                     + "). Record the question elsewhere and pass it with --audio FILE, or type it.")
        if audio:
            message = [voice_cmd.heard_from_file(st.settings, audio)]
        _settle_model(st.settings)
        graph = st.graph()
        end_task = st.app().runtime.end_abandoned_turn  # a turn stopped or failed: idle again, its browser closed
        notice = st.settings.models.primary.notice  # e.g. the demo model's "do not trust its answers"
        if notice:
            say(notice, err=True, fg=typer.colors.YELLOW, bold=True)
        thread_id = thread or f"cli-{uuid.uuid4().hex[:8]}"
        if thread and not (graph.get_state({"configurable": {"thread_id": thread}}).values or {}).get("messages"):
            # a typo in an id would otherwise start a new, empty conversation without a word
            say(f"No thread {thread!r} yet: starting it (`jarvis threads list` shows the existing ones).",
                err=True, fg=typer.colors.YELLOW)
        attachments = [_attachment(a) for a in attach or []]
        interactive = can_ask()
        if message:
            code = claimed_turn(st.settings, graph, thread_id, user_input(" ".join(message), attachments),
                                interactive=interactive, end_task=end_task)
            if code == 0 and not thread:
                say(f"(thread {thread_id})", err=True, dim=True)
            raise typer.Exit(code)
        if not interactive:
            fail("no MESSAGE given and no terminal to read one from: pass the message as an argument")
        say(f"Jarvis (thread {thread_id}). Ctrl-D or /quit to leave.", err=True, dim=True)
        while True:
            try:
                text = (input("you> (Enter to speak, or type) ") if microphone else input("you> ")).strip()
            except (EOFError, KeyboardInterrupt):
                say("", err=True)
                break
            if text in ("/quit", "/exit"):
                break
            if microphone and not text:
                text = voice_cmd.heard_from_microphone(st.settings, microphone) or ""
            if not text:
                continue
            claimed_turn(st.settings, graph, thread_id, user_input(text, attachments), interactive=True,
                         end_task=end_task)
            attachments = []
            if microphone:
                voice_cmd.say_aloud(st.settings, last_answer(graph, thread_id))


def _through_running_jarvis(settings: Any, thread: str | None, text: str) -> int | None:
    """The one rule for where a one-shot chat runs: through the `jarvis run` serving this data folder when one
    proves it is that one (cli/via_server.py: no graph to build here), else None and the turn runs in this
    process. Attachments and voice stay in-process: their files are read here."""
    from orchestrator.cli.via_server import chat_turn, running_jarvis

    server = running_jarvis(settings.storage.data_dir)
    if server is None:
        return None
    thread_id = thread or f"cli-{uuid.uuid4().hex[:8]}"
    code = chat_turn(server, thread_id, text, interactive=can_ask())
    if code == 0 and not thread:
        say(f"(thread {thread_id})", err=True, dim=True)
    return code


def _settle_model(settings: Any) -> None:
    """The model this chat talks to, by `jarvis run`'s rule (llm/discovery.settle_model). When it does not answer
    and nothing can stand in, the check's sentence is said now (a server that answers without the model named says
    what it lists), and the turn is not retried: it fails at once with the same reason, the message kept in its
    thread for when the model is back. A refused connection is not a slow server worth waiting for."""
    from orchestrator.llm.discovery import settle_model

    model = settle_model(settings)
    if model.switched:
        say(f"model: {model.switched}", err=True, fg=typer.colors.YELLOW, bold=True)
    if not model.ok:
        say(f"model endpoint: {model.message}", err=True, fg=typer.colors.YELLOW)
        settings.models.primary.max_retries = 0


def last_answer(graph: Any, thread_id: str) -> str:
    """The thread's last answer, to be read aloud ("" when the turn ended on a tool call or a confirmation)."""
    messages = (graph.get_state({"configurable": {"thread_id": thread_id}}).values or {}).get("messages") or []
    last = messages[-1] if messages else None
    return last.content if getattr(last, "type", "") == "ai" and isinstance(last.content, str) else ""


def _attachment(ref: str) -> dict[str, Any]:
    from pathlib import Path

    if ref.startswith(("http://", "https://")):
        kind = "youtube" if "youtu" in ref else "url"
        return {"kind": kind, "ref": ref}
    p = Path(ref).expanduser().resolve()
    if not p.exists():
        fail(f"attachment {ref} does not exist")
    return {"kind": "pdf" if p.suffix.lower() == ".pdf" else "file", "ref": str(p), "name": p.name}
