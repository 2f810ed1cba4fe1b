"""`jarvis auth google [--no-browser] [--port N] [--status] [--logout]`: connect Gmail and Google Calendar."""

from __future__ import annotations

import typer

from orchestrator.cli import fail, say, state

auth_app = typer.Typer(help="Connect accounts Jarvis may use (the tokens go to the OS keyring).", no_args_is_help=True)


@auth_app.command("google")
def google(
    ctx: typer.Context,
    no_browser: bool = typer.Option(False, "--no-browser", help="print the sign-in address instead of opening a browser"),
    port: int = typer.Option(0, "--port", help="local port for Google's redirect (0: any free port)"),
    status: bool = typer.Option(False, "--status", help="only say whether Google is connected"),
    logout: bool = typer.Option(False, "--logout", help="forget the stored Google token"),
) -> None:
    """Sign in to Google (Gmail and Calendar) in the browser; the token is stored in the keyring."""
    from orchestrator.tools import google_auth
    from orchestrator.core.secrets import SecretError

    settings = state(ctx).settings
    try:
        if status:
            creds = google_auth.load_credentials(settings)
            if creds is None:
                fail("Google is not connected: run `jarvis auth google`")
            say(f"Google is connected (account {settings.google.account!r}; scopes: {', '.join(creds.scopes or [])})")
            return
        if logout:
            if not google_auth.forget(settings):
                fail("Google was not connected; nothing to forget")
            say("forgot the Google token")
            return
        google_auth.run_installed_app_flow(settings, open_browser=not no_browser, port=port)
    except google_auth.GoogleAuthError as exc:
        fail(str(exc))
    except SecretError as exc:
        fail(f"cannot use the keyring: {exc}")
    say(f"Google is connected; the token is stored in the keyring as {google_auth.token_secret_name(settings)!r}.")


def register(app: typer.Typer) -> None:
    app.add_typer(auth_app, name="auth")
