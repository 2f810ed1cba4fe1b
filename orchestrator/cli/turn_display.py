"""How a turn is shown on the terminal and its confirmations asked there, the same whether the turn runs in the
command (cli/chat.py) or in the `jarvis run` it goes through (cli/via_server.py): both stream the same events."""

from __future__ import annotations

import json
import sys
from typing import Any, Literal

import typer

from orchestrator.cli import EXIT_FAILURE, say
from orchestrator.core.visible import elide, visible, visible_json
from .questions import call_name, describe_confirmation

EXIT_STOPPED = 130  # the shell's code for a command ended by Ctrl-C


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
    return elide(" ".join(text.split()), limit)


def ask_answer(c: dict[str, Any]) -> tuple[Literal["approve", "edit", "deny"], dict[str, Any] | None, str | None]:
    """Ask on the terminal: approve / edit / deny (in-doubt calls: approve again / skip, given as approve / deny).
    Returns (answer, the new arguments of an edit, the reason of a deny)."""
    say(describe_confirmation(c), fg=typer.colors.YELLOW, err=True)
    in_doubt = c.get("kind") == "in_doubt"
    prompt = "[a]pprove again / [s]kip" if in_doubt else "[a]pprove / [e]dit / [d]eny"
    while True:
        answer = typer.prompt(prompt, default="d" if not in_doubt else "s", err=True).strip().lower()
        if answer in ("a", "approve", "y", "yes"):
            return "approve", None, None
        if in_doubt and answer in ("s", "skip", "d", "deny", "n", "no"):
            return "deny", None, None
        if not in_doubt and answer in ("d", "deny", "n", "no"):
            reason = typer.prompt("reason (optional)", default="", err=True, show_default=False)
            return "deny", None, reason or None
        if not in_doubt and answer in ("e", "edit"):
            raw = typer.prompt("arguments as JSON", default=visible_json(c.get("args") or {}), err=True)
            try:
                args = json.loads(raw)
            except json.JSONDecodeError as exc:
                say(f"not valid JSON: {exc}", err=True, fg=typer.colors.RED)
                continue
            return "edit", args, None


def print_pending_help(thread_id: str, pending: list[dict[str, Any]]) -> None:
    for c in pending:
        say(describe_confirmation(c), fg=typer.colors.YELLOW, err=True)
        say(f"  jarvis approve {thread_id} --call {call_name(c)}   (or --args JSON to change the arguments)\n"
            f"  jarvis deny {thread_id} --call {call_name(c)} --reason TEXT", err=True)
    say(f"Waiting for confirmation on thread {thread_id}: answer each question with the commands under it "
        "(`jarvis pending` lists everything waiting).", err=True)


class TurnPrinter:
    """Shows one turn's events on the terminal as they come (from the graph here, or from `jarvis run`'s stream:
    the same events) and keeps the confirmations it asks for in `pending`."""

    def __init__(self, stopped_text: str):
        self.stopped_text = stopped_text
        self.pending: list[dict[str, Any]] = []
        self.answered_with_tokens = False
        self.streamed = ""  # the model's words since the last tool call

    def show(self, wire: dict[str, Any]) -> int | None:
        """Print the event `wire` (the dict the graph and the HTTP stream give); the exit code when it ends the
        turn, else None."""
        from orchestrator.chat.turn_events import (Confirmation, Done, Error, Progress, Stopped, Token, ToolEnd,
                                                   ToolStart, from_wire)

        ev = from_wire(wire)
        if isinstance(ev, Token):
            sys.stdout.write(visible(ev.text))
            sys.stdout.flush()
            self.answered_with_tokens = True
            self.streamed += ev.text
        elif isinstance(ev, ToolStart):
            self.streamed = ""
            say(f"  -> {ev.tool}({_short(ev.args)})", err=True, fg=typer.colors.CYAN)
        elif isinstance(ev, ToolEnd):
            mark = "ok" if ev.ok else "error"
            say(f"  <- {ev.tool} {mark} in {ev.duration_ms:.0f} ms: {_short(ev.preview)}",
                err=True, fg=typer.colors.CYAN if ev.ok else typer.colors.RED)
        elif isinstance(ev, Progress):
            say(f"  .. {ev.message or _short(wire)}", err=True, fg=typer.colors.BLUE)
        elif isinstance(ev, Confirmation):
            self.pending.append(wire)
        elif isinstance(ev, Error):
            self.end_line()
            say(f"error: {ev.message}", err=True, fg=typer.colors.RED)
            return EXIT_FAILURE
        elif isinstance(ev, Stopped):  # what was said is on the screen already; the thread keeps it with the note
            self.end_line()
            say(self.stopped_text, err=True, fg=typer.colors.YELLOW)
            return EXIT_STOPPED
        elif isinstance(ev, Done):
            content = ev.content or ""
            said, kept = self.streamed.strip(), content.strip()
            if not self.answered_with_tokens:
                sys.stdout.write(visible(content))
            elif said and kept.startswith(said):  # a note added after the words ("cut off at the limit")
                sys.stdout.write(visible(kept[len(said):]))
            elif kept and kept not in said:  # replaced (the model only repeated its call); a repair is inside
                sys.stdout.write("\n" + visible(content))
            if self.answered_with_tokens or content:
                sys.stdout.write("\n")
            sys.stdout.flush()
            return 0
        return None

    def end_line(self) -> None:
        if self.answered_with_tokens:
            sys.stdout.write("\n")
