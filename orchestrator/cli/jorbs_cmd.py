"""`jarvis jorbs ...` (long-running tasks) and `jarvis inbox` (messages no jorb claimed)."""

from __future__ import annotations

import json
import logging
from typing import Any

import typer

from orchestrator.cli import dumps, fail, say, state

jorbs_app = typer.Typer(help="Long-running tasks that message people, wait for replies and resume.", no_args_is_help=True)
inbox_app = typer.Typer(help="Inbound messages no jorb claimed (unmatched, ambiguous, spam).", invoke_without_command=True)


def service(ctx: typer.Context):
    return state(ctx).app().jorbs


def store(ctx: typer.Context):
    """The jorbs' rows, for commands that only read them: the jorb service (its model client, checkpointer and
    graphs) took 2 of the 2.6 s `jarvis jorbs list` took."""
    from orchestrator.jorbs.store import JorbStore

    return JorbStore(state(ctx).settings)


def _guard(fn, *args: Any, **kwargs: Any):
    from orchestrator.core.disk_full import disk_full_message, is_disk_full
    from orchestrator.jorbs.service import JorbError
    from orchestrator.jorbs.store import JorbNotFound
    from orchestrator.llm.client import ModelEndpointError
    from orchestrator.core.secrets import redact

    try:
        return fn(*args, **kwargs)
    except (JorbError, JorbNotFound, ModelEndpointError) as exc:
        fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - a step that broke: say so, and how to go on
        logging.getLogger(__name__).debug("jorb step failed", exc_info=exc)
        how = "`jarvis jorbs list --all` shows it; `jarvis jorbs retry ID` runs the step again once that is fixed."
        if is_disk_full(exc):
            fail(f"{disk_full_message('the jorb step could not be saved')} Then: {how}")
        fail(f"the jorb step failed: {type(exc).__name__}: {redact(str(exc))[:500]}. {how}")


def print_view(view: Any, as_json: bool = False, full: bool = False) -> None:
    from orchestrator.jorbs.schema import JorbStatus
    from orchestrator.tools.answers import item_ref
    from .questions import call_name, describe_confirmation

    data = view.as_dict(full=full)
    if as_json:
        say(dumps(data))
        return
    row = view.row
    say(f"jorb {row.id}  {row.name}  [{row.status}]", bold=True)
    if row.waiting_party and row.status == JorbStatus.AWAITING_REPLY:
        say(f"  waiting for a reply from {row.waiting_party} ({row.waiting_channel})"
            f"  -> jarvis jorbs reply {row.id} TEXT")
    if row.pause_reason and row.status == JorbStatus.PAUSED:
        say(f"  paused: {row.pause_reason}")
    for p in view.pending:
        if p.get("type") == "confirmation":
            say("  " + describe_confirmation(p).replace("\n", "\n  "))
        if p.get("type") in ("jorb_pause", "confirmation"):  # the answer names this question and no later one
            say(f"  -> jarvis jorbs approve {row.id} --call {call_name({**p, 'ref': item_ref(p)})} [--note TEXT]"
                f" | reject {row.id} | cancel {row.id}")
        if p.get("type") == "human_step":
            say(f"  your turn to decide the next step -> jarvis jorbs step {row.id} JSON")
    if row.result is not None:
        say(f"  result: {json.dumps(row.result, ensure_ascii=False, default=str)}")
    if row.error:
        say(f"  error: {row.error}", fg=typer.colors.RED)
    if full and view.state is not None:
        say(f"  plan: {row.plan}")
        say(f"  policy: {row.policy}  steps: {row.steps}  tokens: {row.tokens}  contacts: {', '.join(row.contacts) or '-'}")
        if row.autonomy:
            say(f"  autonomy: {', '.join(f'{k}={v}' for k, v in row.autonomy.items())}")
        say("  conversation:")
        for h in view.state.history:
            arrow = "->" if h.role == "jarvis" else "<-"
            who = "you (intervention)" if h.role == "user" else h.party
            say(f"    {h.at} {arrow} {who} [{h.channel}]: {h.text}")
        say("  script results:")
        for r in view.state.script_results:
            outcome = f"error: {r.error}" if r.error else f"result: {json.dumps(r.result, default=str)[:300]}"
            say(f"    step {r.step}: {r.script.strip()[:200]!r}\n      {outcome}")


@jorbs_app.command("create")
def create(ctx: typer.Context,
           name: str = typer.Option(..., "--name", help="a short name"),
           plan: str = typer.Option(..., "--plan", help="the task in detail"),
           contact: list[str] = typer.Option(None, "--contact", help="a person the jorb talks to (repeatable)"),
           policy: str = typer.Option("llm", "--policy", help="llm, human, or heuristic:<name>"),
           autonomy: list[str] = typer.Option(None, "--autonomy", help="EFFECT=MODE for this jorb's own calls (repeatable)"),
           allow: list[str] = typer.Option(None, "--allow", help="restrict the jorb to these capabilities (repeatable)"),
           yes: bool = typer.Option(False, "--yes", help="approve the autonomy overrides without asking"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Create a jorb and run it until it waits for something."""
    overrides: dict[str, str] = {}
    for item in autonomy or []:
        effect, sep, mode = item.partition("=")
        if not sep:
            fail(f"--autonomy {item!r}: use EFFECT=MODE, e.g. message_send=auto")
        overrides[effect.strip()] = mode.strip()
    if overrides and not yes:
        granted = ", ".join(f"{k}={v}" for k, v in overrides.items())
        say(f"This jorb may act without asking for: {granted} (its own calls only).", err=True)
        if not typer.confirm("Approve these overrides?", default=False, err=True):
            fail("not created: the autonomy overrides were not approved")
    view = _guard(service(ctx).create, name, plan, contacts=contact or [], policy=policy, autonomy=overrides,
                  context=list(allow) if allow else None)
    print_view(view, as_json)


@jorbs_app.command("list")
def list_(ctx: typer.Context, all_: bool = typer.Option(False, "--all", help="include finished jorbs"),
          as_json: bool = typer.Option(False, "--json")) -> None:
    """List jorbs (open ones; --all for every one)."""
    from orchestrator.jorbs.schema import OPEN_STATUSES, JorbStatus

    rows = store(ctx).list(statuses=None if all_ else OPEN_STATUSES)
    if as_json:
        say(dumps([r.as_dict() for r in rows]))
        return
    if not rows:
        say("no jorbs" if all_ else "no open jorbs (--all shows finished ones)")
    for r in rows:
        what = r.pause_reason if r.status == JorbStatus.PAUSED else (f"waiting for {r.waiting_party}" if r.status == JorbStatus.AWAITING_REPLY else "")
        say(f"{r.id}  {r.status:<15} {r.name[:40]:<40} {what[:60]}")


@jorbs_app.command("show")
def show(ctx: typer.Context, jorb_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Show a jorb: plan, status, conversation, script results."""
    print_view(_guard(service(ctx).view, jorb_id), as_json, full=True)


@jorbs_app.command("reply")
def reply(ctx: typer.Context, jorb_id: str, text: list[str] = typer.Argument(..., help="the message"),
          sender: str = typer.Option(None, "--from", help="who is speaking (default: the counterpart the jorb waits on)"),
          channel: str = typer.Option("local", "--channel"),
          as_user: bool = typer.Option(False, "--as-user", help="this is you intervening, not the counterpart"),
          as_json: bool = typer.Option(False, "--json")) -> None:
    """Answer a jorb as its counterpart (or, with --as-user, as yourself)."""
    view = _guard(service(ctx).reply, jorb_id, " ".join(text), party=sender, channel=channel, is_user=as_user)
    print_view(view, as_json)


@jorbs_app.command("approve")
def approve(ctx: typer.Context, jorb_id: str, note: str = typer.Option(None, "--note"),
            call: str = typer.Option(None, "--call", help="only this question (as `jarvis jorbs show` names it)"),
            every: bool = typer.Option(False, "--all", help="what it asks now, without showing it first (for scripts)"),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Approve what a paused jorb asks (its pause, or a confirmation one of its scripts needs). On a terminal,
    without --call or --all, it shows the question and asks."""
    print_view(approved(ctx, jorb_id, note, call, every, "jarvis jorbs approve"), as_json)


def approved(ctx: typer.Context, jorb_id: str, note: str | None, call: str | None, every: bool, command: str) -> Any:
    """Approve the question --call names, or the one shown on the terminal, or with --all what is asked now. The
    service answers a named question only while it is still the one pending (its ref), never one asked since."""
    if every and call:
        fail("--all and --call name different things: give one of them")
    svc = service(ctx)
    asked = None if every else _question(svc, jorb_id, call, command)
    bound = {"interrupt_id": asked["interrupt_id"], "ref": asked["ref"]} if asked else {}
    return _guard(svc.approve, jorb_id, note, **bound)


def _question(svc: Any, jorb_id: str, call: str | None, command: str) -> dict[str, Any] | None:
    from orchestrator.tools.answers import with_ref
    from .questions import named, shown_first

    asked = [with_ref(p) for p in _guard(svc.view, jorb_id).pending if p.get("type") in ("jorb_pause", "confirmation")]
    if call:
        chosen = named(asked, call)
        if not chosen:
            fail(f"jorb {jorb_id} does not wait for {call!r} (it was answered, or it moved on): "
                 f"`jarvis jorbs show {jorb_id}` shows what it asks now; nothing was done")
        return chosen[0]
    if not asked:
        return None  # the service says what the jorb waits for instead
    shown_first(asked[:1], f"{command} {jorb_id}")
    return asked[0]


@jorbs_app.command("reject")
def reject(ctx: typer.Context, jorb_id: str, note: str = typer.Option(None, "--note"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Reject what a paused jorb asks; it is told and carries on (or stops, as its plan says)."""
    print_view(_guard(service(ctx).reject, jorb_id, note), as_json)


@jorbs_app.command("cancel")
def cancel(ctx: typer.Context, jorb_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Stop a jorb for good."""
    print_view(_guard(service(ctx).cancel, jorb_id), as_json)


@jorbs_app.command("retry")
def retry(ctx: typer.Context, jorb_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Run a failed jorb's interrupted step again (after fixing what failed: a full disk, a broken tool)."""
    print_view(_guard(service(ctx).retry, jorb_id), as_json)


@jorbs_app.command("step")
def step(ctx: typer.Context, jorb_id: str, step_json: str = typer.Argument(..., help="the step as JSON"),
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Decide a human-policy jorb's next step yourself (the step JSON: reasoning, script, await_reply, done...)."""
    print_view(_guard(service(ctx).answer_step, jorb_id, step_json), as_json)


@jorbs_app.command("policy")
def policy(ctx: typer.Context, jorb_id: str, name: str = typer.Argument(..., help="llm, human or heuristic:<name>")) -> None:
    """Swap the policy deciding a paused jorb's steps."""
    row = _guard(service(ctx).set_policy, jorb_id, name)
    say(f"jorb {row.id} now decides with {row.policy}")


@inbox_app.callback()
def inbox(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """List inbound messages no jorb claimed, with the reasoning."""
    if ctx.invoked_subcommand:
        return
    rows = store(ctx).messages(statuses=("unmatched", "ambiguous", "spam", "low_confidence"), direction="in")
    if as_json:
        say(dumps([r.as_dict() for r in rows]))
        return
    if not rows:
        say("the inbox is empty")
    for r in rows:
        say(f"#{r.id} {r.created_at:%Y-%m-%d %H:%M} [{r.status}] {r.channel} {r.party}: {r.text[:80]}")
        if r.reasoning:
            say(f"    why: {r.reasoning}")


@inbox_app.command("assign")
def assign(ctx: typer.Context, message_id: int, jorb_id: str) -> None:
    """Give an inbox message to a jorb (it is delivered like a reply)."""
    svc = service(ctx)
    msg = svc.store.message(message_id)
    if msg is None or msg.direction != "in":
        fail(f"no inbound message #{message_id} (see `jarvis inbox`)")
    svc.store.set_message(message_id, status="assigned", jorb_id=svc.store.get(jorb_id).id)
    view = _guard(svc.reply, jorb_id, msg.text, party=msg.party, channel=msg.channel)
    print_view(view)


@inbox_app.command("new-jorb")
def new_jorb(ctx: typer.Context, message_id: int, name: str = typer.Option(..., "--name"),
             plan: str = typer.Option(None, "--plan", help="default: answer the message sensibly")) -> None:
    """Start a new jorb from an inbox message; the sender becomes its contact."""
    svc = service(ctx)
    msg = svc.store.message(message_id)
    if msg is None or msg.direction != "in":
        fail(f"no inbound message #{message_id} (see `jarvis inbox`)")
    plan_text = plan or f"{msg.party} wrote on {msg.channel}: {msg.text!r}. Handle it sensibly; ask the user before committing."
    view = _guard(svc.create, name, plan_text, contacts=[msg.party])
    svc.store.set_message(message_id, status="assigned", jorb_id=view.row.id)
    print_view(view)


def register(app: typer.Typer) -> None:
    app.add_typer(jorbs_app, name="jorbs")
    app.add_typer(inbox_app, name="inbox")
