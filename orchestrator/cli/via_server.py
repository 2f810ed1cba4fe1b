"""A one-shot `jarvis chat "..."` sent through the `jarvis run` serving the same data folder, when one runs.

That server has its graph, tools and model client built already; building them again in the command costs seconds
of imports. The turn goes through the API the web UI uses (POST a message, read its event stream, POST the answers
to confirmations, asked here on the terminal), so it runs, is claimed, and is recorded as any web turn is. The
server is used only once it has proved it holds this data folder's token without being sent it
(core/server_identity.py): a stale address, whoever listens there now, never receives the token, and the command
runs the turn itself as before. This module loads httpx (when it is used: every command's start-up imports this
package's modules) and nothing of the graph, so the fast path stays fast.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.cli import EXIT_FAILURE, EXIT_PENDING, say
from orchestrator.cli.turn_display import EXIT_STOPPED, TurnPrinter, ask_answer, print_pending_help
from orchestrator.core.server_identity import IDENTITY_PATH, proves, recorded

if TYPE_CHECKING:
    import httpx

CHECK_TIMEOUT_S = 2.0  # a loopback server that takes longer to say who it is is not one to wait for
STOPPED_TEXT = "Stopped: you stopped this turn."


@dataclass(frozen=True)
class RunningJarvis:
    url: str
    token: str


def running_jarvis(data_dir: Path) -> RunningJarvis | None:
    """The `jarvis run` serving `data_dir`, once it proved it holds the folder's token; None otherwise."""
    found = recorded(data_dir)
    if found is None:
        return None
    url, token = found
    import httpx

    challenge = secrets.token_urlsafe(24)
    try:
        resp = httpx.get(url + IDENTITY_PATH, params={"challenge": challenge}, timeout=CHECK_TIMEOUT_S)
        answer = resp.json().get("proof") if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    port = httpx.URL(url).port or 80
    return RunningJarvis(url, token) if proves(token, challenge, port, answer) else None


def _events(resp: httpx.Response) -> Iterator[dict[str, Any]]:
    data: list[str] = []
    for line in resp.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def chat_turn(server: RunningJarvis, thread_id: str, text: str, *, interactive: bool) -> int:
    """Run one turn on `thread_id` through `server`, confirmations asked on the terminal; the exit code."""
    import httpx

    headers = {"Authorization": f"Bearer {server.token}"}
    path = f"/api/threads/{thread_id}/messages"  # then /resume with the answers to its confirmations
    body: dict[str, Any] = {"text": text}
    with httpx.Client(base_url=server.url, headers=headers, timeout=httpx.Timeout(30, read=None)) as client:
        while True:
            printer = TurnPrinter(STOPPED_TEXT)
            try:
                with client.stream("POST", path, json=body) as resp:
                    if resp.status_code != 200:
                        resp.read()
                        say(f"error: {_detail(resp)}", err=True, fg="red")
                        return EXIT_FAILURE
                    for ev in _events(resp):
                        code = None if ev["event"] in ("start", "end") else printer.show(ev)
                        if code is not None:
                            return code
            except KeyboardInterrupt:  # Ctrl-C stops the turn, as Stop does in the web UI
                client.post(f"/api/threads/{thread_id}/stop")
                printer.end_line()
                say(STOPPED_TEXT, err=True, fg="yellow")
                return EXIT_STOPPED
            if not printer.pending:
                return 0
            printer.end_line()
            if not interactive:
                print_pending_help(thread_id, printer.pending)
                return EXIT_PENDING
            answers = {}
            for c in printer.pending:
                answer, args, reason = ask_answer(c)
                answers[c["interrupt_id"]] = {"answer": answer, "args": args, "reason": reason, "ref": c.get("ref")}
            path, body = f"/api/threads/{thread_id}/resume", {"answers": answers}


def _detail(resp: httpx.Response) -> str:
    try:
        return str(resp.json().get("detail") or resp.text)
    except (ValueError, AttributeError):
        return f"{resp.status_code} {resp.text[:200]}"
