"""`jarvis service install|uninstall|start|stop|status|logs|run`: Jarvis as a login service (systemd user unit on
Linux, launchd agent on macOS; orchestrator/server/service_unit.py), and `run`, the same restart policy in the
foreground for systems with neither."""

from __future__ import annotations


import typer

from orchestrator.cli import fail, say, state

service_app = typer.Typer(help="Run Jarvis as a login service, restarted when it fails.", no_args_is_help=True)


def _service(ctx: typer.Context):
    from orchestrator.server.service_unit import ServiceError, service_for_platform

    try:
        return service_for_platform(state(ctx).settings)
    except ServiceError as exc:
        fail(str(exc))


def _drive(action, what: str) -> None:
    from orchestrator.server.service_unit import ServiceError

    try:
        action()
    except ServiceError as exc:
        fail(f"{what}: {exc}")


@service_app.command("install")
def install(ctx: typer.Context,
            start: bool = typer.Option(True, "--start/--no-start", help="start it now as well as at each login")) -> None:
    """Write the service file (current --config and --profile), enable it at login and start it."""
    service = _service(ctx)
    path = service.write()
    say(f"wrote {path}")
    if not start:
        say("not started (--no-start): `jarvis service start` starts it; it starts by itself at the next login"
            if service.kind == "launchd" else "not enabled yet (--no-start): `jarvis service start` starts it")
        return
    _drive(service.activate, f"the {service.kind} service file is written but could not be enabled")
    say(f"enabled and started ({service.kind}); `jarvis service status` shows it, `jarvis service logs` its "
        "output")
    if service.kind == "systemd user":
        say("To keep it running while you are logged out: loginctl enable-linger $USER", err=True)


@service_app.command("uninstall")
def uninstall(ctx: typer.Context) -> None:
    """Stop the service and remove its file."""
    service = _service(ctx)
    from orchestrator.server.service_unit import ServiceError

    try:
        service.deactivate()
    except ServiceError as exc:  # the file goes anyway: nothing is left to start it at the next login
        say(f"note: {exc}", err=True, fg=typer.colors.YELLOW)
    say(f"removed {service.path}" if service.remove() else f"nothing to remove: {service.path} did not exist")


@service_app.command("start")
def start(ctx: typer.Context) -> None:
    """Start the installed service."""
    service = _service(ctx)
    if not service.installed:
        fail(f"the service is not installed ({service.path} does not exist): run `jarvis service install`")
    _drive(service.start, "could not start the service")
    say("started")


@service_app.command("stop")
def stop(ctx: typer.Context) -> None:
    """Stop the service until the next `start` or login."""
    service = _service(ctx)
    _drive(service.stop, "could not stop the service")
    say("stopped")


@service_app.command("status")
def status(ctx: typer.Context) -> None:
    """Whether the service is installed and running, as the system's service manager says."""
    service = _service(ctx)
    if not service.installed:
        say(f"not installed ({service.path} does not exist): `jarvis service install` installs it")
        raise typer.Exit(3)
    say(f"installed: {service.path}")
    _drive(lambda: say(service.status()), "could not read the service's state")


@service_app.command("logs")
def logs(ctx: typer.Context, lines: int = typer.Option(100, "--lines", "-n", min=1),
         follow: bool = typer.Option(False, "--follow", "-f")) -> None:
    """The service's output (the journal on Linux, its log file on macOS)."""
    import subprocess

    from orchestrator.core.child_env import child_environment

    service = _service(ctx)
    argv = service.logs_command(lines, follow)
    try:
        raise typer.Exit(subprocess.call(argv, env=child_environment()))
    except FileNotFoundError:
        fail(f"{argv[0]} is not installed here; the logs cannot be shown")


@service_app.command("run")
def run(ctx: typer.Context) -> None:
    """Run `jarvis run` in the foreground and start it again when it fails or is killed, by the same restart
    policy as the service (for systems without systemd or launchd)."""
    import os
    import signal

    from orchestrator.server.service_unit import run_command
    from orchestrator.core.supervisor import JARVIS_POLICY, Supervisor

    command = run_command(state(ctx).settings)
    supervisor = Supervisor(command.argv, JARVIS_POLICY, name="jarvis run", env={**os.environ, **command.env},
                            cwd=str(command.cwd),
                            on_event=lambda text: say(f"jarvis service: {text}", err=True))

    def stop(signum, _frame):  # SIGTERM / Ctrl-C: stop jarvis run cleanly, no restart
        supervisor.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    raise typer.Exit(supervisor.run())


def register(app: typer.Typer) -> None:
    app.add_typer(service_app, name="service")
