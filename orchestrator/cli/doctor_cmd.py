"""`jarvis doctor [--json]`: checks the model, storage, disk, sandbox, MCP servers, keyring, Google, the port and
the scheduler (orchestrator/server/doctor.py); each problem with one sentence of what to do. Exit 0 only when every
check passes (one that does not apply here is not a failure)."""

from __future__ import annotations

import json

import typer

from orchestrator.cli import EXIT_FAILURE, say, state

MARKS = {True: ("ok", typer.colors.GREEN), False: ("PROBLEM", typer.colors.RED), None: ("-", None)}


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(ctx: typer.Context,
               as_json: bool = typer.Option(False, "--json", help="the checks as JSON (name, ok, detail, fix, last_error)")
               ) -> None:
        """Check that everything Jarvis needs works here, and say what to do about what does not."""
        from orchestrator.server.doctor import all_pass, run_checks

        checks = run_checks(state(ctx).settings)
        passed = all_pass(checks)
        if as_json:
            say(json.dumps({"ok": passed, "checks": [c.as_dict() for c in checks]}, indent=2))
        else:
            for c in checks:
                mark, color = MARKS[c.ok]
                say(f"{mark:>7}  {c.name}: {c.detail}", fg=color)
                if c.ok is False and c.fix:
                    say(f"         what to do: {c.fix}")
                if c.last_error and c.ok is not True:
                    say(f"         last error: {c.last_error}")
            problems = sum(c.ok is False for c in checks)
            say("all checks pass" if passed else f"{problems} problem(s)", err=not passed)
        if not passed:
            raise typer.Exit(EXIT_FAILURE)
