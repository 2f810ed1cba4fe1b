"""`jarvis pending`, `jarvis approve THREAD`, `jarvis deny THREAD`: resolve confirmations from any process."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from orchestrator.core.ids import ConversationKind, conversation_of
from orchestrator.core.visible import shown_arguments
from orchestrator.cli import dumps, fail, say, state
from .chat import run_turn
from .questions import call_name, named, shown_first

if TYPE_CHECKING:
    from orchestrator.tools.answers import Answer

Decision = tuple["Answer", "str | None", "dict[str, Any] | None"]  # the answer, a deny's reason, an edit's args


def _pick(pending: list[dict[str, Any]], call: str | None, thread_id: str) -> list[dict[str, Any]]:
    if call:
        chosen = named(pending, call)
        if not chosen:
            fail(f"no pending confirmation {call!r} on thread {thread_id}")
        return chosen
    return pending


def _resolve(ctx: typer.Context, thread_id: str, decision: Decision, call: str | None, unseen: bool = False) -> None:
    from orchestrator.storage.claims import ClaimBusy, Claims

    st = state(ctx)
    if conversation_of(thread_id).kind is ConversationKind.JORB:  # the jorb service takes the jorb's own claim
        _resolve_held(st, thread_id, decision, call, unseen)
        return
    # Held from reading what is pending to the end of the resumed turn: a second approver (another process,
    # the UI) sees the thread busy, then finds nothing pending, and never resumes it twice.
    try:
        with Claims(st.settings).held(thread_id):
            _resolve_held(st, thread_id, decision, call, unseen)
    except ClaimBusy as busy:
        fail(f"thread {thread_id} is running a turn in {busy.holder or 'another worker'}; try again when it has finished "
             "(`jarvis pending` shows what is still waiting)")


def _resolve_held(st: Any, thread_id: str, decision: Decision, call: str | None, unseen: bool) -> None:
    from orchestrator.chat.turns import resume_command
    from orchestrator.tools.answers import resume_value

    graph = st.graph()
    st.app().recover_in_doubt(thread_id)
    pending = st.app().pending(thread_id)
    if not pending:
        fail(f"nothing is pending on thread {thread_id}: it was already resolved (or never asked); nothing was done")
    chosen = _pick(pending, call, thread_id)
    answer, note, args = decision
    if answer != "deny" and call is None and not unseen:
        shown_first(chosen, f"jarvis approve {thread_id}")
    if answer == "edit" and len(chosen) > 1:
        fail(f"{len(chosen)} confirmations are pending on {thread_id}; pick one with --call (see `jarvis pending`)")
    resume = {p["interrupt_id"]: resume_value(p, answer, note=note, args=args) for p in chosen}
    jorb_id = conversation_of(thread_id).jorb_id
    if jorb_id is not None:
        from .jorbs_cmd import print_view

        from orchestrator.jorbs.service import JorbError

        jorbs = st.app().jorbs
        try:
            with jorbs.answering(chosen, answer, "the CLI"):  # a phone may answer at the same moment: one wins
                view = jorbs.run(jorb_id, resume_command(resume))
        except JorbError as exc:
            fail(str(exc))
        print_view(view)
        raise typer.Exit(0)
    from orchestrator.approvals.store import AlreadyAnswered

    try:  # the same record as the UI's and the phone's answers: one of them is first
        with st.app().thread_answers.answering(thread_id, chosen, resume, "the CLI"):
            code = run_turn(graph, thread_id, resume_command(resume), interactive=False,
                            end_task=st.app().runtime.end_abandoned_turn)
    except AlreadyAnswered as exc:
        fail(str(exc))
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    @app.command()
    def pending(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON objects")) -> None:
        """List the confirmations every thread is waiting for."""
        st = state(ctx)
        if not _anything_may_wait(st.settings):  # read from the tables alone: no graph, no model, no tools loaded
            say(dumps([]) if as_json else "nothing is waiting for confirmation")
            return
        st.graph()  # a clear error when Jarvis cannot start
        st.app().recover_in_doubt()
        items = st.app().pending()
        if as_json:
            say(dumps(items))
            return
        if not items:
            say("nothing is waiting for confirmation")
        for p in items:
            label = "MAY HAVE HAPPENED" if p.get("kind") == "in_doubt" else "confirm"
            say(f"{p['thread_id']}  [{label}] {p.get('tool')}: {p.get('summary')}")
            if p.get("reason"):
                say(f"    why: {p['reason']}")
            say(f"    args: {shown_arguments(p.get('args') or {})}")
            for sent in p.get("sent") or []:  # confirmations.notify: answerable from the phone too
                say(f"    sent to {sent['channel']} ({sent['to']}) at {sent['at'][:16].replace('T', ' ')} UTC"
                    + (f", {sent['used']}" if sent.get("used") else ""))
            say(f"    jarvis approve {p['thread_id']} --call {call_name(p)}   |   "
                f"jarvis deny {p['thread_id']} --call {call_name(p)}")

    @app.command()
    def approve(
        ctx: typer.Context,
        thread_id: str,
        args: str = typer.Option(None, "--args", help="run with these arguments instead (JSON object)"),
        call: str = typer.Option(None, "--call",
                                 help="only this confirmation (as `jarvis pending` names it, or its interrupt id)"),
        every: bool = typer.Option(False, "--all",
                                   help="every confirmation THREAD waits for, without showing them first (for scripts)"),
    ) -> None:
        """Approve what THREAD is waiting for (--call one, or --all), then let the turn continue. On a terminal,
        without either, it shows what is pending and asks."""
        if every and call:
            fail("--all and --call name different things: give one of them")
        decision: Decision = ("approve", None, None)
        if args is not None:
            try:
                edited = json.loads(args)
            except json.JSONDecodeError as exc:
                fail(f"--args is not valid JSON: {exc}")
            if not isinstance(edited, dict):
                fail("--args must be a JSON object of the tool's arguments")
            decision = ("edit", None, edited)
        _resolve(ctx, thread_id, decision, call, unseen=every)

    @app.command()
    def deny(
        ctx: typer.Context,
        thread_id: str,
        reason: str = typer.Option(None, "--reason", help="told to the planner"),
        call: str = typer.Option(None, "--call",
                                 help="only this confirmation (as `jarvis pending` names it, or its interrupt id)"),
    ) -> None:
        """Deny what THREAD is waiting for; the planner is told and the turn goes on."""
        _resolve(ctx, thread_id, ("deny", reason, None), call)


def _anything_may_wait(settings: Any) -> bool:
    """Whether any thread or jorb is waiting or running (a confirmation may be pending in its checkpoint), or the
    effects ledger holds a call that may have happened (recovering it asks). When none is, `jarvis pending` says
    so without building the graph: most of its start-up was loading what it did not need. A glance through sqlite3
    (storage/glance.py) answers first when it can tell: no SQLAlchemy is loaded to say that nothing waits."""
    from orchestrator.storage.glance import anything_may_wait

    glanced = anything_may_wait(settings)
    if glanced is not None:
        return glanced
    from orchestrator.storage.threads import RUNNING, WAITING, ThreadIndex
    from orchestrator.tools.ledger import EffectsLedger

    try:
        return bool(ThreadIndex(settings).list(limit=1, statuses=(WAITING, RUNNING))
                    or EffectsLedger(settings).in_doubt())
    except Exception:  # noqa: BLE001 - unreadable storage: the full path says why, in its own words
        return True
