"""`jarvis missions ...`: jorbs in batch mode (the Sheratan protocol: up to 5 jobs a round)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from orchestrator.cli import fail, say
from .jorbs_cmd import _guard, approved, print_view, service, store

missions_app = typer.Typer(help="Missions: a goal pursued in rounds of up to 5 concurrent jobs.", no_args_is_help=True)


def print_mission(view, as_json: bool = False, full: bool = False) -> None:
    if as_json or not full:
        print_view(view, as_json, full=full)
        return
    print_view(view)
    row, st = view.row, view.state
    say(f"  goal: {row.plan}")
    say(f"  workspace: {row.options.get('workspace') or '-'}   rounds: {st.iteration if st else 0}")
    if st is None:
        return
    for i in range(1, st.iteration + 1):
        say(f"  round {i}:")
        for n in st.notes:
            if n.iteration == i:
                say(f"    {n.kind}: {n.text}")
        for r in st.results:
            if r.iteration == i:
                outcome = json.dumps(r.result, default=str)[:160] if r.ok else f"error: {r.error}"
                say(f"    job {r.job} ({r.kind} {json.dumps(r.params)[:80]}): {outcome}")


@missions_app.command("create")
def create(ctx: typer.Context,
           goal: str = typer.Option(..., "--goal", help="what the mission should achieve"),
           workspace: Path = typer.Option(None, "--workspace", help="the folder its file jobs work in"),
           name: str = typer.Option(None, "--name"),
           policy: str = typer.Option("llm", "--policy"),
           autonomy: list[str] = typer.Option(None, "--autonomy", help="EFFECT=MODE for this mission's own jobs"),
           yes: bool = typer.Option(False, "--yes", help="approve the autonomy overrides without asking"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Create a mission and run it until it completes or waits for you."""
    options = {}
    if workspace is not None:
        ws = workspace.expanduser().resolve()
        if not ws.is_dir():
            fail(f"--workspace {workspace} is not a folder")
        options["workspace"] = str(ws)
    overrides = {}
    for item in autonomy or []:
        effect, sep, mode = item.partition("=")
        if not sep:
            fail(f"--autonomy {item!r}: use EFFECT=MODE, e.g. fs_write=auto")
        overrides[effect.strip()] = mode.strip()
    if overrides and not yes and not typer.confirm(
            f"This mission may act without asking for: {', '.join(f'{k}={v}' for k, v in overrides.items())}. Approve?",
            default=False, err=True):
        fail("not created: the autonomy overrides were not approved")
    view = _guard(service(ctx).create, name or goal[:60], goal, policy=policy, autonomy=overrides, mode="mission",
                  options=options)
    print_mission(view, as_json)


@missions_app.command("list")
def list_(ctx: typer.Context, all_: bool = typer.Option(False, "--all"), as_json: bool = typer.Option(False, "--json")) -> None:
    """List missions."""
    from orchestrator.jorbs.schema import OPEN_STATUSES

    rows = store(ctx).list(statuses=None if all_ else OPEN_STATUSES, mode="mission")
    if as_json:
        say(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        return
    if not rows:
        say("no missions" if all_ else "no open missions (--all shows finished ones)")
    for r in rows:
        say(f"{r.id}  {r.status:<15} {r.name[:50]:<50} {(r.pause_reason or '')[:60]}")


@missions_app.command("show")
def show(ctx: typer.Context, mission_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Show a mission round by round."""
    print_mission(_guard(service(ctx).view, mission_id), as_json, full=True)


CALL_HELP = "only this question (as `jarvis missions show` names it)"
ALL_HELP = "what it asks now, without showing it first (for scripts)"


@missions_app.command("answer")
def answer(ctx: typer.Context, mission_id: str, text: list[str] = typer.Argument(...),
           call: str = typer.Option(None, "--call", help=CALL_HELP),
           every: bool = typer.Option(False, "--all", help=ALL_HELP)) -> None:
    """Answer a mission's question (`ask`). On a terminal, without --call or --all, it shows the question first."""
    print_mission(approved(ctx, mission_id, " ".join(text), call, every, "jarvis missions answer"))


@missions_app.command("approve")
def approve(ctx: typer.Context, mission_id: str, note: str = typer.Option(None, "--note"),
            call: str = typer.Option(None, "--call", help=CALL_HELP),
            every: bool = typer.Option(False, "--all", help=ALL_HELP)) -> None:
    """Approve what a paused mission asks (a confirmation of one of its jobs, or its question). On a terminal,
    without --call or --all, it shows the question first."""
    print_mission(approved(ctx, mission_id, note, call, every, "jarvis missions approve"))


@missions_app.command("reject")
def reject(ctx: typer.Context, mission_id: str, note: str = typer.Option(None, "--note")) -> None:
    """Reject what a paused mission asks."""
    print_mission(_guard(service(ctx).reject, mission_id, note))


@missions_app.command("cancel")
def cancel(ctx: typer.Context, mission_id: str) -> None:
    """Stop a mission."""
    print_mission(_guard(service(ctx).cancel, mission_id))


def register(app: typer.Typer) -> None:
    app.add_typer(missions_app, name="missions")
