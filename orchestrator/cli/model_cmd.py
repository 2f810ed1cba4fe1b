"""`jarvis model check`: does the configured model answer, does it call tools (llm/tool_probe.py), and if not,
what to do about it."""

from __future__ import annotations

import typer

from orchestrator.cli import EXIT_FAILURE, say, state

model_app = typer.Typer(help="The chat models Jarvis plans with.", no_args_is_help=True)


@model_app.command("check")
def model_check(ctx: typer.Context) -> None:
    """Check that each configured model answers and calls tools (an embedded model is checked without being
    started)."""
    from orchestrator.llm.client import check_endpoint, model_config
    from orchestrator.llm.tool_probe import probe_tool_calls

    settings = state(ctx).settings
    roles = ["primary"] + (["heavy"] if settings.models.heavy is not None else [])
    failed = False
    for role in roles:
        ok, message = check_endpoint(settings, role)  # type: ignore[arg-type]
        say(f"{role}: {message}", err=not ok, fg=None if ok else typer.colors.RED)
        notice = model_config(settings, role)[1].notice  # type: ignore[arg-type]
        if notice:
            say(notice, fg=typer.colors.YELLOW, bold=True)
        failed = failed or not ok
        if not ok:
            continue
        tools = probe_tool_calls(settings, role)  # type: ignore[arg-type]
        say(f"{role} tools: {tools.message}", err=tools.ok is False,
            fg={True: None, False: typer.colors.RED}.get(tools.ok, typer.colors.YELLOW))  # type: ignore[arg-type]
        if tools.fix:
            say(tools.fix, err=tools.ok is False)
        failed = failed or tools.ok is False
    if failed:
        raise typer.Exit(EXIT_FAILURE)


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")
