"""The `jarvis` command line. Each module of this package adds its commands through `register(app)`.

Exit codes: 0 success, 1 failure (with a message), 2 bad usage, 3 a confirmation is pending and there was
no terminal to ask on.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from collections.abc import Callable
from typing import Any, NoReturn

import typer
from typer.core import TyperOption

from orchestrator.core.config import ConfigError, Settings, load_settings
from orchestrator.core.visible import visible, visible_json


def _flags_shown_as_flags() -> None:
    """Typer 0.29 labels every flag "<bool>" in --help, as if it took a value (`--verbose <bool>`); a flag is
    shown bare, as click shows it."""
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_shown_as_flags()

EXIT_FAILURE = 1
EXIT_PENDING = 3


def dumps(obj: Any) -> str:
    """What `--json` prints: indented, any value that JSON has no type for as its text, every character that would
    act on a terminal written as its JSON escape (core/visible.py)."""
    return visible_json(obj, indent=2, default=str)


def say(message: Any = "", **style: Any) -> None:
    """Print a line (typer.secho's options: err, nl, fg, bold, dim...). Every line the CLI prints goes through
    here: what it shows comes from files, mail, web pages, models and servers, and a control character in it would
    act on the terminal (rewrite a confirmation, hide text) instead of being shown (core/visible.py)."""
    typer.secho(visible(str(message)), **style)

app = typer.Typer(
    name="jarvis",
    help="Jarvis: a personal assistant that runs on your own machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class CliState:
    def __init__(self, config: str | None, profile: str | None, verbose: bool):
        self.config_path = config
        self.profile = profile
        self.verbose = verbose
        self._settings: Settings | None = None
        self._app: Any = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = load_settings(self.config_path, self.profile)
            except ConfigError as exc:
                fail(str(exc))
            _setup_logging(self._settings, self.verbose)
        return self._settings

    def app(self) -> Any:
        """This command's App (orchestrator/app.py): its parts are built when first used."""
        if self._app is None:
            from orchestrator.app import App

            self._app = App(self.settings)
        return self._app

    def graph(self) -> Any:
        return self.starting(lambda: self.app().graph)

    def close_app(self) -> None:
        """Close this command's App, if it was built."""
        if self._app is not None:
            self._app.close()

    def starting(self, build: Callable[[], Any]) -> Any:
        """`build()`, or one clear line saying why Jarvis cannot start instead of a traceback."""
        try:
            return build()
        except typer.Exit:  # already said why (a configuration error): not "could not start Jarvis: 1" after it
            raise
        except Exception as exc:  # noqa: BLE001 - one clear line instead of a traceback
            from orchestrator.core.disk_full import disk_full_message, is_disk_full

            if is_disk_full(exc):
                fail(disk_full_message("Jarvis could not open its databases"))
            fail(f"could not start Jarvis: {exc}")


def _setup_logging(settings: Settings, verbose: bool) -> None:
    from orchestrator.core.secrets import install_log_redaction

    level = logging.DEBUG if verbose else getattr(logging, settings.log_level.upper(), logging.INFO)
    logging.basicConfig(level=max(level, logging.WARNING) if not verbose else level,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    install_log_redaction()


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    from orchestrator.core.secrets import redact

    say(f"error: {redact(message)}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


def state(ctx: typer.Context) -> CliState:
    obj = ctx.find_root().obj
    if obj is None:
        obj = ctx.find_root().obj = CliState(None, None, False)
    return obj


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            say(f"jarvis {version('jarvis')}")
        except PackageNotFoundError:
            say("jarvis (not installed as a package: run `make install`)")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: str = typer.Option(None, "--config", "-c", help="configuration file (default: $JARVIS_CONFIG or config/config.yml)"),
    profile: str = typer.Option(None, "--profile", "-p", help="a profile of the configuration file"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="log debug output to stderr"),
    _version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                  help="print Jarvis's version and exit"),
) -> None:
    ctx.obj = CliState(config, profile, verbose)


# Options of the root that may also be written after the command (`jarvis chat --profile demo`), as people do.
GLOBAL_WITH_VALUE = {"--config", "-c", "--profile", "-p"}
GLOBAL_FLAGS = {"--verbose", "-v"}


def hoist_global_options(args: list[str]) -> list[str]:
    """`args` with the root's options moved before the command wherever they were written (up to a `--`)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if name in GLOBAL_WITH_VALUE and arg.startswith("--") and "=" in arg:
            front.append(arg)
        elif arg in GLOBAL_WITH_VALUE and i + 1 < len(args):
            front.extend(args[i:i + 2])
            i += 1
        elif arg in GLOBAL_FLAGS:
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_commands()


def main() -> None:
    from orchestrator.storage.pg import StorageUnavailable

    try:
        app(args=hoist_global_options(sys.argv[1:]), prog_name="jarvis")
    except StorageUnavailable as exc:  # a database the config names and that is not there: say so, no traceback
        say(f"jarvis: {exc}", err=True)
        raise SystemExit(EXIT_FAILURE) from None
    except Exception as exc:
        from orchestrator.core.disk_full import disk_full_message, is_disk_full

        if not is_disk_full(exc):
            raise
        say(f"jarvis: {disk_full_message('this command could not finish')}", err=True)
        raise SystemExit(EXIT_FAILURE) from None
