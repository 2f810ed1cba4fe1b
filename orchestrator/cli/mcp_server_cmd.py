"""`jarvis mcp serve` and `jarvis mcp clients add | list | revoke`: Jarvis as an MCP server for the user's other
agents (orchestrator/mcp_server/), and the named clients that may call it."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import typer

from orchestrator.cli import dumps, fail, say, state

clients_app = typer.Typer(help="The agents that may call Jarvis's MCP server, one token each.", no_args_is_help=True)


def _store(ctx: typer.Context) -> Any:
    from orchestrator.mcp_server.clients import ClientStore

    return ClientStore(state(ctx).settings)


def _issue(ctx: typer.Context, name: str, renew: bool) -> None:
    from orchestrator.mcp_server.clients import ClientError, client_config

    settings = state(ctx).settings
    try:
        token = _store(ctx).add(name, renew=renew)
    except ClientError as exc:
        fail(str(exc))
    say(f"client {name}: its token is shown once; paste this into the client's MCP settings:", err=True)
    say(dumps(client_config(settings, token)))
    if not settings.mcp_server.enabled:
        say("note: mcp_server.enabled is false in the config: nothing is served until you set it", err=True,
            fg=typer.colors.YELLOW)


@clients_app.command("add")
def add(ctx: typer.Context, name: str = typer.Argument(..., help="the client's name (claude, cursor, ...)")) -> None:
    """Add a client and print its token, inside the `mcpServers` lines to paste."""
    _issue(ctx, name, renew=False)


@clients_app.command("list")
def list_clients(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Each client, when it was added, how many calls it made and the last one."""
    rows = _store(ctx).list()
    if as_json:
        say(dumps([{"name": c.name, "created": c.created, "calls": c.calls, "last_call": c.last_call} for c in rows]))
        return
    if not rows:
        say("no MCP clients: add one with `jarvis mcp clients add NAME`")
    for c in rows:
        last = datetime.fromtimestamp(c.last_call).isoformat(timespec="seconds") if c.last_call else "never"
        say(f"{c.name:<20} added {datetime.fromtimestamp(c.created).date()}  {c.calls} calls, last {last}")


@clients_app.command("revoke")
def revoke(ctx: typer.Context, name: str = typer.Argument(..., help="the client to remove")) -> None:
    """Remove a client: its token stops working at its next request."""
    from orchestrator.mcp_server.clients import ClientError

    try:
        _store(ctx).revoke(name)
    except ClientError as exc:
        fail(str(exc))
    say(f"revoked {name}")


def serve(ctx: typer.Context,
          print_config: bool = typer.Option(False, "--print-config", help="print the mcpServers lines to paste, "
                                            "with a new token for --client, and exit"),
          client: str = typer.Option(None, "--client", help="with --print-config: the client (added if new, "
                                     "else given a new token: the old one stops working)")) -> None:
    """Serve Jarvis over MCP on stdin/stdout, for the client whose token is in JARVIS_MCP_TOKEN (`jarvis run` serves
    the same over HTTP at mcp_server.path)."""
    if print_config:
        if not client:
            fail("--print-config needs --client NAME (the token printed is that client's)")
        from orchestrator.mcp_server.clients import ClientError

        try:
            exists = any(c.name == client for c in _store(ctx).list())
        except ClientError as exc:
            fail(str(exc))
        _issue(ctx, client, renew=exists)
        return
    st = state(ctx)
    if not st.settings.mcp_server.enabled:
        fail("Jarvis's MCP server is off: set mcp_server.enabled: true in the config")
    from orchestrator.mcp_server.clients import TOKEN_ENV

    store = _store(ctx)
    token = os.environ.get(TOKEN_ENV) or ""
    if store.who(token) is None:
        fail(f"{TOKEN_ENV} holds no client's token (missing, wrong or revoked): `jarvis mcp clients add NAME`")
    import anyio

    from orchestrator.mcp_server.offer import McpOffer
    from orchestrator.mcp_server.protocol import serve_stdio

    app = st.starting(st.app)
    try:
        anyio.run(serve_stdio, McpOffer(app), store, token)
    finally:
        app.close()


def register(mcp_app: typer.Typer) -> None:
    mcp_app.command("serve")(serve)
    mcp_app.add_typer(clients_app, name="clients")
