"""`jarvis run`: the web UI and its API on server.host:server.port, plus the background services.

Prints the URL with the access token (kept in <data_dir>/server_token, mode 0600), and records its address beside
it (<data_dir>/server_url) while it runs, for `jarvis chat` (cli/via_server.py). Loopback only unless the
configuration names another host, and then it says so loudly. Background services (scheduler, inbound
routing...) are listed in orchestrator/server/services.py SERVICE_FACTORIES.
"""

from __future__ import annotations

import threading
from typing import Any

import typer

from orchestrator.cli import fail, say, state


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        ctx: typer.Context,
        host: str = typer.Option(None, "--host", help="override server.host (another host than loopback is exposed to the network)"),
        port: int = typer.Option(None, "--port", help="override server.port (0: any free port)"),
        no_services: bool = typer.Option(False, "--no-services", help="serve the UI only; start no background service"),
        open_browser: bool = typer.Option(None, "--open/--no-open", help="open the UI in the browser (server.open_browser)"),
        token_in_output: bool = typer.Option(True, "--token-in-output/--no-token-in-output",
                                             help="print the UI's link with its access token (the service does not: "
                                                  "its output goes to the journal, which others may read)"),
    ) -> None:
        """Serve the local web UI (chat, confirmations, tools, runs, settings) and run the background services."""
        from orchestrator.core.server_identity import forget_url, record_url
        from orchestrator.server.listen import bind_socket, uvicorn_server
        from orchestrator.server.security import TOKEN_FILE, Guard, GuardMiddleware, is_loopback, load_or_create_token
        from orchestrator.server.starting import StartingApp

        st = state(ctx)
        settings = st.settings
        if host is not None:
            settings.server.host = host
        if port is not None:
            settings.server.port = port
        bound = settings.server.host
        if not is_loopback(bound):
            say(f"WARNING: serving on {bound}, reachable from other machines. Anyone who has the token can "
                "act as you; keep server.host 127.0.0.1 unless you mean it.", err=True, fg=typer.colors.RED,
                bold=True)
            if bound in ("0.0.0.0", "::") and not settings.server.allowed_hosts:
                say("  Requests are only accepted under loopback names; list the names other machines use "
                    "in server.allowed_hosts.", err=True, fg=typer.colors.RED)
        try:
            sock = bind_socket(bound, settings.server.port)
        except OSError as exc:
            fail(f"cannot listen on {bound}:{settings.server.port}: {exc.strerror or exc}. Stop the other program, or "
                 "pick another port with --port or server.port.")
        real_port = sock.getsockname()[1]
        token = st.starting(lambda: load_or_create_token(settings))  # the data folder: a clear line when unusable
        # The port answers at once (/healthz, the page); Jarvis is built behind it and requests wait for it.
        guard = Guard(settings, token, real_port)
        shell = StartingApp(lambda inner: GuardMiddleware(inner, guard_of=lambda: guard), token=token)
        server = uvicorn_server(shell)
        shown_host = "127.0.0.1" if bound in ("0.0.0.0", "::") else (f"[{bound}]" if ":" in bound else bound)
        url = f"http://{shown_host}:{real_port}/?token={token}"
        if token_in_output:
            say(f"Jarvis is running at {url}", err=False)
            say("Open that URL in your browser (it carries your access token). Ctrl-C stops Jarvis.", err=True)
        else:
            token_file = settings.data_path(TOKEN_FILE)
            say(f"Jarvis is running at http://{shown_host}:{real_port}/ (the access token is in {token_file}: "
                "open the address with ?token=<it>)", err=False)
        import sys

        sys.stdout.flush()
        # `jarvis chat` sends its turns here while this runs (cli/via_server.py), after checking who answers
        record_url(settings.storage.data_dir, f"http://{shown_host}:{real_port}")
        started: list = []
        outcome: dict[str, int] = {}
        builder = threading.Thread(target=_build, name="jarvis-start", daemon=True,
                                   args=(st, shell, server, token, real_port, no_services, started, outcome))
        builder.start()
        if open_browser if open_browser is not None else settings.server.open_browser:
            import webbrowser

            webbrowser.open(url)
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once it has shut down cleanly
            pass
        finally:
            # Stopped while still starting: the build is not waited for (it may be reading a large model); what it
            # started so far is stopped, and the process's exit ends the rest.
            forget_url(settings.storage.data_dir, f"http://{shown_host}:{real_port}")
            builder.join(timeout=2)
            for model_server in list(started):
                model_server.stop()
        if not builder.is_alive():
            st.close_app()
        if outcome.get("code"):
            raise typer.Exit(outcome["code"])
        say("Jarvis stopped.", err=True)


def _build(st: Any, shell: Any, server: Any, token: str, port: int, no_services: bool, started: list,
           outcome: dict[str, int]) -> None:
    """Everything `jarvis run` needs behind its port, in the order a request may need it; then the full app
    takes the requests. When Jarvis cannot start, the line saying why is printed and the server stops."""
    try:
        settings = st.settings
        shell.stage = "checking the model"
        from orchestrator.llm.discovery import settle_model
        from orchestrator.llm.model_server import start_configured

        started.extend(start_configured(settings))  # models.*.start: a model server Jarvis starts and watches
        model = settle_model(settings)
        if model.switched:
            say(f"model: {model.switched}", err=True, fg=typer.colors.YELLOW, bold=True)
        if not model.ok:
            say(f"model endpoint: {model.message} (the UI shows this too; chats fail until it answers)",
                err=True, fg=typer.colors.YELLOW)
        if settings.models.primary.notice and not model.switched:  # e.g. the demo model's "do not trust its answers"
            say(settings.models.primary.notice, err=True, fg=typer.colors.YELLOW, bold=True)
        shell.stage = "loading the tools and the conversation graph"
        from orchestrator.server.app import bind_port, create_app
        from orchestrator.server.schema_tables import migrate_whole_schema

        st.graph()  # a clear error when Jarvis cannot start
        shell.stage = "bringing the database up to date"
        st.starting(lambda: migrate_whole_schema(settings))  # after a `git pull`: the tables the graph does not use too
        shell.stage = "starting the background services"
        app = create_app(st.app(), token=token, services=[] if no_services else None)
        bind_port(app, port)
        shell.ready(app)
    except (Exception, SystemExit) as exc:  # typer.Exit: `fail` already said why
        from orchestrator.core.secrets import redact

        code = getattr(exc, "exit_code", None) or getattr(exc, "code", None) or 1
        why = redact(str(exc))  # said on the terminal and to the requests held: a URL's password masked in both
        if not isinstance(exc, (typer.Exit, SystemExit)):
            say(f"error: could not start Jarvis: {why}", err=True, fg=typer.colors.RED)
        outcome["code"] = int(code) if isinstance(code, int) else 1
        shell.failed(f"Jarvis could not start: {why}" if why else "Jarvis could not start (see its terminal)")
        server.should_exit = True
