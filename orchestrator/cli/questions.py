"""How the CLI shows a pending question and names it, so an answer given from a terminal or a script answers the
question that was shown (`jarvis approve`, `jarvis jorbs approve`, `jarvis missions approve|answer`)."""

from __future__ import annotations

import sys
from typing import Any

import typer

from orchestrator.cli import fail, say
from orchestrator.core.visible import shown_arguments


def can_ask() -> bool:
    try:
        return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()
    except (ValueError, AttributeError):
        return False


def describe_confirmation(c: dict[str, Any]) -> str:
    if c.get("type") == "jorb_pause":  # a jorb's own pause or a mission's question: its reason is the question
        return f"Jorb {c.get('jorb_name') or c.get('jorb_id')} asks ({c.get('kind')}): {c.get('reason')}"
    lines = [f"Confirmation needed ({c.get('tool')}): {c.get('summary')}"]
    if c.get("side_effects"):
        lines.append(f"  side effects: {', '.join(c['side_effects'])}")
    if c.get("reason"):
        lines.append(f"  why: {c['reason']}")
    if c.get("error"):
        lines.append(f"  note: {c['error']}")
    lines.append(f"  arguments: {shown_arguments(c.get('args') or {})}")
    return "\n".join(lines)


# `jarvis pending` names each question by the start of its ref (tools/answers.item_ref: the thread, the interrupt,
# the call and why it is asked again): `--call` with it answers that question only, never another one asked since
# under the same interrupt (work re-run from the same checkpoint, an edit refused). Long enough that no one can
# make another question's ref start the same way.
REF_SHOWN = 16


def call_name(item: dict[str, Any]) -> str:
    """What `--call` takes to answer this question and no other."""
    return str(item["ref"])[:REF_SHOWN]


def named(items: list[dict[str, Any]], call: str) -> list[dict[str, Any]]:
    """The pending items --call names: by the start of their ref as shown, or by interrupt id or key."""
    return [p for p in items if call in (p.get("interrupt_id"), p.get("key")) or str(p.get("key", "")).endswith(call)
            or (len(call) >= REF_SHOWN and str(p.get("ref", "")).startswith(call))]


def shown_first(chosen: list[dict[str, Any]], command: str) -> None:
    """An approval without --call approves what is pending when it runs, which may not be what the user last
    looked at: on a terminal it shows it and asks first. Without one (a script) nothing is approved unseen unless
    the script says so with --all; it is told each question's --call name instead. `command`: the approval's
    command line up to --call (`jarvis approve THREAD`)."""
    if not (can_ask() and sys.stderr.isatty()):
        for item in chosen:
            say(describe_confirmation(item), err=True, fg=typer.colors.YELLOW)
            say(f"    {command} --call {call_name(item)}", err=True)
        fail(f"nothing was approved: without a terminal to show {'it' if len(chosen) == 1 else 'them'} on, "
             f"`{command}` approves only a question it names (--call, as listed above), or what is pending "
             "now, unseen, with --all")
    for item in chosen:
        say(describe_confirmation(item), err=True, fg=typer.colors.YELLOW)
    if not typer.confirm("Approve this?" if len(chosen) == 1 else f"Approve these {len(chosen)}?", default=False,
                         err=True):
        fail("nothing was approved")
