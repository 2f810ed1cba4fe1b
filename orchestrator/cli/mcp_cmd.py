"""`jarvis mcp status | tools | review | import`: the MCP servers of mcp.dir, their tools, what a server changed in
them since they were first seen, and bringing in existing servers. `serve` and `clients` (Jarvis as a server) are
cli/mcp_server_cmd.py's."""

from __future__ import annotations

from pathlib import Path

import typer

from orchestrator.cli import dumps, fail, say, state

mcp_app = typer.Typer(help="MCP servers (one TOML file each in mcp.dir): status, tools, review, import; Jarvis as "
                      "a server: serve, clients.", no_args_is_help=True)


def _start(ctx: typer.Context, wait_s: float):
    from orchestrator.mcp.provider import McpProvider

    st = state(ctx)
    provider = McpProvider(st.settings, st.app().mcp_manager)
    provider.manager.ensure_started(wait_s=wait_s)
    return provider


@mcp_app.command("status")
def status(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON"),
           start: bool = typer.Option(True, "--start/--no-start", help="start the servers to check them (default)"),
           wait: float = typer.Option(30.0, help="seconds to wait for servers to start")) -> None:
    """Each server's state (ready, unhealthy, unavailable, disabled, broken), tool count and last error."""
    settings = state(ctx).settings
    provider = _start(ctx, wait) if start else None
    manager = provider.manager if provider is not None else state(ctx).app().mcp_manager
    rows = manager.status()
    withheld: dict[str, list[str]] = {}
    if provider is not None:
        provider.list_tools()
        for server, tool in sorted(provider.withheld):
            withheld.setdefault(server, []).append(tool)
    if as_json:
        say(dumps([r.as_dict() for r in rows]))
        return
    if not rows:
        say(f"no MCP servers configured: add TOML files to {settings.mcp.dir} or run `jarvis mcp import FILE`")
        return
    for r in rows:
        color = {"ready": typer.colors.GREEN, "unhealthy": typer.colors.RED, "broken": typer.colors.RED}.get(r.state)
        say(f"{r.name:<16} {r.state:<12} {r.tools:>3} tools", fg=color, nl=False)
        extra = f"  restarts {r.restarts}" if r.restarts else ""
        say(f"{extra}  {r.last_error or r.description}")
        if r.note:
            say(f"{'':<34}{r.note}")
        if r.name in withheld:
            say(f"{'':<34}changed since first seen, not offered: {', '.join(withheld[r.name])} "
                f"(jarvis mcp review {r.name})", fg=typer.colors.YELLOW)
    if provider is not None and provider.pins_problem:
        say(f"no MCP tool is offered: {provider.pins_problem}", fg=typer.colors.RED)


@mcp_app.command("tools")
def tools(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON"),
          server: str = typer.Option(None, "--server", help="only this server"),
          wait: float = typer.Option(30.0, help="seconds to wait for servers to start")) -> None:
    """Every tool of the ready servers: server, MCP name, the name the model sees, side effects."""
    provider = _start(ctx, wait)
    infos = [i for i in provider.infos() if server is None or i.server == server]
    if as_json:
        say(dumps([i.as_dict() for i in infos]))
        return
    if not infos:
        say("no tools: no MCP server is ready (see `jarvis mcp status`)")
    for i in infos:
        effects = ", ".join(i.side_effects) or "read-only"
        off = "  (disabled)" if not i.enabled else ""
        if i.changed:
            off += f"  (changed since first seen, not offered: jarvis mcp review {i.server})"
        say(f"{i.server:<14} {i.exposed_name:<40} {effects}{off}")
    for name, why in sorted(provider.wrapper_problems.items()):
        say(f"wrapper {name} not offered: {why}", fg=typer.colors.YELLOW)


@mcp_app.command("review")
def review(ctx: typer.Context, server: str = typer.Argument(None, help="the server whose changed tools to show "
                                                                       "(default: every server's)"),
           accept: bool = typer.Option(False, "--accept", help="offer the tools as they are now"),
           wait: float = typer.Option(30.0, help="seconds to wait for servers to start")) -> None:
    """Show what a server changed in its tools since they were first seen (their descriptions are what the model
    reads as instructions); with --accept, offer them to the model again as they are now."""
    provider = _start(ctx, wait)
    provider.list_tools()
    if provider.pins_problem:
        fail(f"no MCP tool is offered: {provider.pins_problem}")
    changes = [c for (srv, _name), c in sorted(provider.withheld.items()) if server is None or srv == server]
    if server is not None and server not in provider.manager.configs():
        fail(f"no MCP server named {server} (see `jarvis mcp status`)")
    if not changes:
        say(f"no tool of {server or 'any server'} changed since it was first seen")
        return
    for change in changes:
        say(f"{change.tool} ({change.server}):", bold=True)
        if change.added:  # its whole text is new: there is nothing to compare it with
            say("  new: not in the server's first listing")
            say(f"  now:        {change.now['description']}", fg=typer.colors.YELLOW)
            say(f"  arguments:  {dumps(change.now.get('input_schema'))}", fg=typer.colors.YELLOW)
            continue
        say(f"  first seen: {change.before['description']}")
        say(f"  now:        {change.now['description']}", fg=typer.colors.YELLOW)
        for part in change.changed_parts():  # the arguments, the title, the annotations its effects follow
            label = {"input_schema": "arguments"}.get(part, part)
            say(f"  {label} first seen: {dumps(change.before.get(part))}")
            say(f"  {label} now:        {dumps(change.now.get(part))}", fg=typer.colors.YELLOW)
    if not accept:
        named = f" {server}" if server else ""
        say(f"Not offered to the model until you accept them: jarvis mcp review{named} --accept")
        return
    accepted = []
    for name in sorted({c.server for c in changes}):
        accepted += provider.pins.accept(name, provider.manager.tools_of(name),
                                         {c.tool: c.digest for c in changes if c.server == name})
    say(f"accepted: {', '.join(accepted)}; offered to the model from the next turn")


@mcp_app.command("import")
def import_cmd(ctx: typer.Context, file: Path = typer.Argument(..., help="an mcpServers JSON file "
                                                                        "(claude_desktop_config.json, .cursor/mcp.json, Jan's mcp_config.json)"),
               overwrite: bool = typer.Option(False, "--overwrite", help="replace existing TOML files of the same name"),
               keyring: bool = typer.Option(True, "--keyring/--no-keyring",
                                            help="move API keys and tokens found in env/headers to the keyring")) -> None:
    """Write one mcp/<name>.toml per server of an mcpServers JSON file."""
    from orchestrator.mcp.config import import_mcp_servers

    settings = state(ctx).settings
    try:
        result = import_mcp_servers(file.expanduser(), Path(settings.mcp.dir), overwrite=overwrite,
                                    store_secrets=keyring)
    except ValueError as exc:
        fail(str(exc))
    for path in result.written:
        say(f"wrote {path}")
    for note in result.notes:
        say(f"note: {note}")
    for skipped in result.skipped:
        say(f"skipped {skipped}", fg=typer.colors.YELLOW, err=True)
    if not result.written:
        fail("no server was imported" + (" (see above)" if result.skipped else ": the file lists none"))
    say("check them with `jarvis mcp status`")


def register(app: typer.Typer) -> None:
    from orchestrator.cli import mcp_server_cmd

    mcp_server_cmd.register(mcp_app)  # Jarvis as a server: serve, clients
    app.add_typer(mcp_app, name="mcp")
