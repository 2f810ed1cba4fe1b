"""`jarvis open [--no-browser]`: the web UI of the `jarvis run` serving this data folder, with its access token.

The page keeps the token in its tab only (sessionStorage: a cookie would reach every server on 127.0.0.1,
docs/THREAT_MODEL.md), so a new tab or a restarted browser has none; this prints the URL again, with the token,
and opens it in the default browser. The URL is given only once the server on the recorded port has proved that
it holds this folder's token without being sent it (core/server_identity.py, through cli/via_server.py's
`running_jarvis`, the one check): a stale port, whoever holds it now, never gets the token. Loads httpx and
nothing of Jarvis's graph, as `jarvis chat`'s fast path.
"""

from __future__ import annotations

import os
import sys

import typer

from orchestrator.cli import EXIT_FAILURE, say, state

NOT_RUNNING = "Jarvis is not running on this data folder: start it with `jarvis run`"


def register(app: typer.Typer) -> None:
    @app.command(name="open")
    def open_ui(
        ctx: typer.Context,
        no_browser: bool = typer.Option(False, "--no-browser", help="only print the URL; open no browser"),
    ) -> None:
        """Print the URL of the running Jarvis's web UI, with its access token, and open it in the browser."""
        from urllib.parse import quote

        from orchestrator.cli.via_server import running_jarvis

        data_dir = state(ctx).settings.storage.data_dir
        server = running_jarvis(data_dir)
        if server is None:
            say(f"error: {NOT_RUNNING}", err=True, fg=typer.colors.RED)
            say(f"  (data folder: {data_dir})", err=True, dim=True)
            raise typer.Exit(EXIT_FAILURE)
        url = f"{server.url}/?token={quote(server.token, safe='')}"
        say(url)
        sys.stdout.flush()
        if no_browser:
            return
        if _headless():
            say("No graphical session here: open that URL in your browser (it carries your access token).", err=True)
            return
        import webbrowser

        if not webbrowser.open(url):
            say("No browser could be started: open that URL in yours (it carries your access token).", err=True)


def _headless() -> bool:
    """No desktop to show a browser on: a Linux or BSD session without X or Wayland (over SSH, a server, a
    container). Python's webbrowser would then start a text browser in this terminal. $BROWSER, when set, is the
    user's own choice and is used."""
    if os.environ.get("BROWSER") or sys.platform in ("darwin", "win32"):
        return False
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
