"""`jarvis run`: the web UI and its API on server.host:server.port, plus the background services.

Prints the URL with the access token (kept in <data_dir>/server_token, mode 0600). Loopback only unless the
configuration names another host, and then it says so loudly. Background services (scheduler, inbound
routing...) are listed in orchestrator/server/services.py SERVICE_FACTORIES.
"""

from __future__ import annotations

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
        from orchestrator.llm.client import check_endpoint
        from orchestrator.llm.discovery import choose_model
        from orchestrator.server.app import bind_socket, create_app, make_server
        from orchestrator.server.schema_tables import migrate_whole_schema
        from orchestrator.server.security import TOKEN_FILE, is_loopback, load_or_create_token

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
        from orchestrator.llm.model_server import start_configured

        started = start_configured(settings)  # models.*.start: a model server Jarvis starts and watches
        ok, message = check_endpoint(settings)
        switched = choose_model(settings, ok)
        if switched:
            say(f"model: {switched}", err=True, fg=typer.colors.YELLOW, bold=True)
            ok, message = check_endpoint(settings)
        if not ok:
            say(f"model endpoint: {message} (the UI shows this too; chats fail until it answers)",
                err=True, fg=typer.colors.YELLOW)
        if settings.models.primary.notice and not switched:  # e.g. the demo model's "do not trust its answers"
            say(settings.models.primary.notice, err=True, fg=typer.colors.YELLOW, bold=True)
        st.graph()  # built before serving: a clear error when Jarvis cannot start
        st.starting(lambda: migrate_whole_schema(settings))  # after a `git pull`: the tables the graph does not use too
        token = load_or_create_token(settings)
        app = create_app(st.app(), token=token, services=[] if no_services else None)
        server = make_server(app, sock)
        real_port = sock.getsockname()[1]
        shown_host = "127.0.0.1" if bound in ("0.0.0.0", "::") else (f"[{bound}]" if ":" in bound else bound)
        url = f"http://{shown_host}:{real_port}/?token={token}"
        if token_in_output:
            say(f"Jarvis is running at {url}", err=False)
            say("Open that URL in your browser (it carries your access token). Ctrl-C stops Jarvis.", err=True)
        else:
            token_file = settings.data_path(TOKEN_FILE)
            say(f"Jarvis is running at http://{shown_host}:{real_port}/ (the access token is in {token_file}: "
                "open the address with ?token=<it>)", err=False)
        if open_browser if open_browser is not None else settings.server.open_browser:
            import webbrowser

            webbrowser.open(url)
        import sys

        sys.stdout.flush()
        try:
            server.run(sockets=[sock])
        except KeyboardInterrupt:  # uvicorn re-raises Ctrl-C once it has shut down cleanly
            pass
        finally:
            for model_server in started:
                model_server.stop()
        st.app().close()
        say("Jarvis stopped.", err=True)
