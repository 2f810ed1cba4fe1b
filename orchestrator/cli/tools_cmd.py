"""`jarvis tools ...`: the tool catalog and JARB's generated tools, by hand.

    jarvis tools list [--json]                   every tool: source, version, status, trust, side effects
    jarvis tools show NAME [--json]              a tool's spec, versions, manifest and last test report
    jarvis tools register --spec S.json --module M.py --tests T.py [--approve-network]
    jarvis tools test NAME [--with-old-tests]    run its tests again in the sandbox
    jarvis tools disable|enable NAME [--version N] a generated tool (every version, or one), or any static or MCP
                                                 tool (kept in the disabled_tools table, like the web UI's switch)
    jarvis tools trust NAME                      skip the per-call confirmations of a new tool
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer


from orchestrator.cli import dumps, fail, say, state

tools_app = typer.Typer(help="The tools Jarvis can call, and the ones it generated (JARB).", no_args_is_help=True)


def _factory(ctx: typer.Context):
    from orchestrator.jarb.tools import make_factory

    st = state(ctx)
    return make_factory(st.settings, taken_names=lambda: _other_tools(ctx).keys(), sandbox=lambda: st.app().sandbox), st.settings


def _other_tools(ctx: typer.Context) -> dict[str, Any]:
    """Static and MCP tools (every provider but the generated one)."""
    catalog = state(ctx).app().catalog
    found: dict[str, Any] = {}
    for provider in catalog.providers:
        if provider.name == "generated":
            continue
        try:
            for tool in provider.list_tools():
                found.setdefault(tool.name, tool)
        except Exception as exc:  # noqa: BLE001 - list what can be listed
            say(f"warning: tool provider {provider.name} failed: {exc}", err=True, fg=typer.colors.YELLOW)
    return found


def _emit(event: dict[str, Any]) -> None:
    ok = event.get("ok")
    color = typer.colors.BLUE if ok is None else (typer.colors.GREEN if ok else typer.colors.RED)
    say(f"  .. [{event.get('stage')}] {event.get('message')}", err=True, fg=color)


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"cannot read the {what} {path}: {exc.strerror}")


def _switches(ctx: typer.Context):
    from orchestrator.tools.switches import ToolSwitches

    return ToolSwitches(state(ctx).settings)


def _rows(ctx: typer.Context) -> list[dict[str, Any]]:
    from integrations.base import side_effects_of, source_of

    factory, _ = _factory(ctx)
    rows: list[dict[str, Any]] = []
    off = _switches(ctx).disabled()
    for name, tool in sorted(_other_tools(ctx).items()):
        rows.append({"name": name, "source": source_of(tool), "version": None,
                     "status": "disabled" if name in off else "active",
                     "in_use": True, "trust": "policy", "side_effects": side_effects_of(tool),
                     "description": (tool.description or "").strip().splitlines()[0] if tool.description else ""})
    in_use = {(r.name, r.version) for r in factory.registry.in_use()}
    for r in factory.registry.all():
        rows.append({"name": r.name, "source": "generated", "version": r.version, "status": r.status,
                     "in_use": (r.name, r.version) in in_use, "trust": r.trust, "confirmed_calls": r.confirmed_calls,
                     "side_effects": r.side_effects, "network_approved": r.network_approved, "path": r.path,
                     "description": r.spec.get("description", "")})
    return rows


@tools_app.command("list")
def tools_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """List every tool: static, MCP and generated (all versions), with source, side effects, trust and version."""
    rows = _rows(ctx)
    if as_json:
        say(dumps(rows))
        return
    say(f"{'NAME':28} {'SOURCE':10} {'VER':>4} {'STATUS':9} {'TRUST':8} SIDE EFFECTS")
    for r in rows:
        version = f"v{r['version']}" if r["version"] else "-"
        status = r["status"] + ("*" if r["source"] == "generated" and r["in_use"] else "")
        effects = ", ".join(r["side_effects"]) or "-"
        say(f"{r['name'][:28]:28} {r['source']:10} {version:>4} {status:9} {r['trust']:8} {effects}")
    if any(r["source"] == "generated" for r in rows):
        say("(* the version in use)")


@tools_app.command("show")
def tools_show(ctx: typer.Context, name: str, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Show a tool: its spec, versions, manifest and last test report (generated), or its metadata (static)."""
    from integrations.base import side_effects_of, source_of

    factory, _ = _factory(ctx)
    versions = factory.registry.versions(name)
    if not versions:
        tool = _other_tools(ctx).get(name)
        if tool is None:
            fail(f"no tool named {name} (see `jarvis tools list`)")
        info = {"name": name, "source": source_of(tool), "side_effects": side_effects_of(tool),
                "description": tool.description, "args": tool.args}
        say(dumps(info))
        return
    in_use = factory.registry.get(name)
    if as_json:
        say(dumps({"name": name, "in_use": in_use.version if in_use else None,
                          "versions": [v.as_dict() for v in versions]}))
        return
    latest = versions[-1]
    say(f"{name}: {latest.spec.get('description', '')}")
    say(f"  in use: {f'v{in_use.version}' if in_use else 'none (no active version)'}")
    for v in versions:
        report = v.test_report or {}
        say(f"  v{v.version}  {v.status:8} trust={v.trust} ({v.confirmed_calls} confirmed calls)  "
            f"effects={', '.join(v.side_effects) or '-'}  network={'approved' if v.network_approved else 'no'}")
        say(f"       module {v.path}  sha256 {v.sha256[:16]}")
        say(f"       tests  {v.tests_path}: {report.get('summary', '-')}")
        caps = (v.manifest or {}).get("capabilities") or []
        say(f"       code uses: {', '.join(caps) or 'nothing beyond computing'}")
    args = latest.spec.get("args") or []
    say("  arguments: " + (", ".join(f"{a['name']}: {a['type']}" for a in args) or "none"))
    say(f"  returns: {latest.spec.get('return_type', 'Any')}")


@tools_app.command("register")
def tools_register(
    ctx: typer.Context,
    spec: Path = typer.Option(..., "--spec", help="the ToolSpec as JSON"),
    module: Path = typer.Option(..., "--module", help="the module (defines a function named like the tool)"),
    tests: Path = typer.Option(..., "--tests", help="pytest tests importing the tool by its plain name"),
    approve_network: bool = typer.Option(False, "--approve-network",
                                         help="allow network access for a spec that declares it (after reading the code)"),
) -> None:
    """Check and test a hand-written tool in the sandbox, then register it (non-zero exit if its tests fail)."""
    from jarb_core.factory import RegistryError, SandboxUnavailable, SpecError

    factory, _ = _factory(ctx)
    raw = _read(spec, "spec")
    code, test_code = _read(module, "module"), _read(tests, "tests")

    def approve(tool_spec, manifest) -> bool:
        if approve_network:
            return True
        uses = "; ".join(f"line {e.line}: {e.what}" for e in manifest.evidence) or "nothing detected"
        if sys.stdin is not None and sys.stdin.isatty():
            return typer.confirm(f"{tool_spec.name} declares network access (the code uses: {uses}). Allow it?",
                                 default=False, err=True)
        return False

    try:
        record, report = factory.register_files(raw, code, test_code, approve_network=approve, progress=_emit)
    except (SpecError, RegistryError, SandboxUnavailable, ValueError) as exc:
        fail(str(exc))
    for warning in report.warnings:
        say(f"warning: {warning}", err=True, fg=typer.colors.YELLOW)
    if record is None:
        if report.output:
            say(report.output.rstrip())
        if not report.passed:
            fail(f"not registered: {report.summary}" + (f" ({'; '.join(report.reasons)})" if report.reasons else ""))
        fail(f"{report.summary}; pass --approve-network to allow it")
    say(f"registered {record.label}: {record.path} ({report.summary}; trust: {record.trust})")


@tools_app.command("test")
def tools_test(
    ctx: typer.Context, name: str,
    version: int = typer.Option(None, "--version", help="a version other than the one in use"),
    with_old_tests: bool = typer.Option(False, "--with-old-tests", help="also run every older version's tests"),
) -> None:
    """Run a generated tool's tests again in the sandbox (a failing version is marked failed)."""
    from jarb_core.factory import RegistryError, SandboxUnavailable
    from jarb_core.loader import ModuleChanged

    factory, _ = _factory(ctx)
    try:
        record, report = factory.retest(name, version, with_old_tests=with_old_tests)
    except (RegistryError, SandboxUnavailable, ModuleChanged) as exc:
        fail(str(exc))
    say(report.output.rstrip())
    for warning in report.warnings:
        say(f"warning: {warning}", err=True, fg=typer.colors.YELLOW)
    if not report.passed:
        fail(f"{record.label}: {report.summary}; status is now {record.status}")
    say(f"{record.label}: {report.summary} (status {record.status})")


def _status(ctx: typer.Context, name: str, enabled: bool, version: int | None) -> None:
    from jarb_core.factory import RegistryError

    factory, _ = _factory(ctx)
    if not factory.registry.versions(name):  # a static or MCP tool: the switch table
        _switch(ctx, name, enabled, version)
        return
    if enabled:
        _switches(ctx).enable(name)  # switched off by name as well (before it was generated): on again
    try:
        records = factory.set_enabled(name, enabled, version)
    except RegistryError as exc:
        fail(str(exc))
    for r in records:
        say(f"{r.label}: {r.status}")
    in_use = factory.registry.get(name)
    say(f"{name} in use: {f'v{in_use.version}' if in_use else 'none'}")


def _switch(ctx: typer.Context, name: str, enabled: bool, version: int | None) -> None:
    from integrations.base import source_of

    if version is not None:
        fail(f"{name} is not a generated tool; --version is only for generated tools")
    switches = _switches(ctx)
    if enabled:
        if not switches.enable(name):
            fail(f"{name} is not disabled (see `jarvis tools list`)")
        say(f"{name}: enabled (the planner and jorb scripts get it again)")
        return
    tool = _other_tools(ctx).get(name)
    if tool is None:
        fail(f"no tool named {name} (see `jarvis tools list`)")
    switches.disable(name, note="jarvis tools disable")
    say(f"{name}: disabled ({source_of(tool)} tool; the planner and jorb scripts no longer get it, and a call "
        "to it is refused)")


@tools_app.command("disable")
def tools_disable(ctx: typer.Context, name: str,
                  version: int = typer.Option(None, "--version", help="only this version (an older one takes over)")) -> None:
    """Stop offering a tool: a generated one (every version, or one), or any static or MCP tool."""
    _status(ctx, name, False, version)


@tools_app.command("enable")
def tools_enable(ctx: typer.Context, name: str,
                 version: int = typer.Option(None, "--version", help="this version (default: the latest)")) -> None:
    """Offer a tool again (a generated one: its latest version, or the one given)."""
    _status(ctx, name, True, version)


@tools_app.command("trust")
def tools_trust(ctx: typer.Context, name: str,
                version: int = typer.Option(None, "--version", help="default: the version in use")) -> None:
    """Let a new generated tool follow its declared autonomy policy instead of confirming every call."""
    from jarb_core.factory import RegistryError

    factory, _ = _factory(ctx)
    try:
        record = factory.trust(name, version)
    except RegistryError as exc:
        fail(str(exc))
    say(f"{record.label}: trust {record.trust} (its side effects follow autonomy.effects: "
        f"{', '.join(record.side_effects) or 'none'})")


def register(app: typer.Typer) -> None:
    app.add_typer(tools_app, name="tools")
