"""`jarvis secrets set|delete NAME`: secrets live in the OS keyring, never in the config file."""

from __future__ import annotations

import sys

import typer

from orchestrator.core import secrets
from orchestrator.cli import fail, say

secrets_app = typer.Typer(help="Store secrets in the OS keyring (referenced in the config as {secret: NAME}).")


@secrets_app.callback(invoke_without_command=True)
def show_backend(ctx: typer.Context) -> None:
    """Which keyring holds the secrets (and the commands)."""
    if ctx.invoked_subcommand is not None:
        return
    info = secrets.backend_info()
    if info["name"] is None:
        say(f"No keyring: {info['problem']}", fg=typer.colors.RED)
    else:
        say(f"Secrets are kept by the keyring backend {info['name']}.")
        if info["plaintext"]:
            say(f"Warning: {info['problem']}.", fg=typer.colors.YELLOW)
    say("Commands: jarvis secrets set NAME | jarvis secrets delete NAME")


@secrets_app.command("set")
def set_(name: str = typer.Argument(..., help="the secret's name, e.g. openai_api_key")) -> None:
    """Store a secret; the value is read without echo (or from standard input when piped)."""
    value = typer.prompt(f"value for {name}", hide_input=True) if sys.stdin.isatty() else sys.stdin.read().strip()
    if not value:
        fail("empty value: nothing stored")
    info = secrets.backend_info()
    if info["plaintext"]:
        say(f"Warning: {info['problem']}.", err=True, fg=typer.colors.YELLOW)
        if sys.stdin.isatty() and not typer.confirm("Store it there anyway?", default=False):
            fail("nothing stored")
    try:
        secrets.set_secret(name, value)
    except secrets.SecretError as exc:
        fail(str(exc))
    say(f"stored secret {name}")


@secrets_app.command("delete")
def delete(name: str) -> None:
    """Delete a secret from the keyring."""
    try:
        removed = secrets.delete_secret(name)
    except secrets.SecretError as exc:
        fail(str(exc))
    if not removed:
        fail(f"no secret named {name}")
    say(f"deleted secret {name}")


def register(app: typer.Typer) -> None:
    app.add_typer(secrets_app, name="secrets")
