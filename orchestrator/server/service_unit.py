"""Jarvis as a login service: a systemd user unit on Linux, a launchd agent on macOS, behind one interface
(`service_for_platform`) that `jarvis service install|uninstall|start|stop|status|logs` drives.

Both run `jarvis run --no-open` with the configuration and profile of the command that installed them, restart it
by `supervisor.JARVIS_POLICY` (Restart=on-failure with a start limit; launchd: KeepAlive unless it exited
cleanly, ThrottleInterval), and keep its output: the journal on Linux, a log file on macOS. The unit's text is
built from argv lists with systemd's own quoting rules, so a checkout under "My Projects" or a `%` in a path
cannot change what runs; a path with a newline or a NUL is refused (no unit format can carry it).
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.core.config import REPO_ROOT, Settings
from orchestrator.core.supervisor import JARVIS_POLICY, RestartPolicy
from orchestrator.core.child_env import child_environment

UNIT_NAME = "jarvis.service"
LAUNCHD_LABEL = "local.jarvis.assistant"


class ServiceError(Exception):
    """The service cannot be installed or driven here; the message says why and what to do."""


@dataclass
class ServiceCommand:
    """What the service runs: argv, environment and working folder."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path = REPO_ROOT


def jarvis_argv() -> list[str]:
    """This installation's `jarvis` (the console script next to the interpreter), or `python -c` calling its
    entry point when there is none (a checkout run without `make install`)."""
    script = Path(sys.executable).parent / "jarvis"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from orchestrator.cli import main; main()"]


def run_command(settings: Settings) -> ServiceCommand:
    env = {"PYTHONUNBUFFERED": "1", "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")}
    if settings.source_path is not None:
        env["JARVIS_CONFIG"] = str(settings.source_path)
    if settings.profile:
        env["JARVIS_PROFILE"] = settings.profile
    # its output goes to the journal (or a log file), which others may read: no access token there
    return ServiceCommand([*jarvis_argv(), "run", "--no-open", "--no-token-in-output"], env, REPO_ROOT)


def _refuse_unwritable(values: Sequence[str]) -> None:
    for value in values:
        if "\n" in value or "\r" in value or "\0" in value:
            raise ServiceError(f"cannot write a service for {value!r}: it holds a line break or a NUL. Move Jarvis "
                               "or its configuration to a path without one.")


# -- systemd ---------------------------------------------------------------------------------------------

def systemd_quote(word: str, *, command: bool = True) -> str:
    """One argument of ExecStart= or one Environment= assignment: `%` doubled (specifiers), backslash and
    double quote escaped, the whole in double quotes; `$` doubled in a command line (variable expansion), which
    Environment= does not do."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if command:
        escaped = escaped.replace("$", "$$")
    return f'"{escaped}"'


def systemd_unit_text(command: ServiceCommand, policy: RestartPolicy = JARVIS_POLICY) -> str:
    _refuse_unwritable([*command.argv, *command.env.values(), *command.env, str(command.cwd)])
    env_lines = "".join(f"Environment={systemd_quote(f'{k}={v}', command=False)}\n" for k, v in sorted(command.env.items()))
    restart = "always" if policy.restart == "always" else "on-failure"
    return (
        "# Written by `jarvis service install`; `jarvis service uninstall` removes it.\n"
        "[Unit]\n"
        "Description=Jarvis, a personal assistant (jarvis run)\n"
        f"StartLimitIntervalSec={policy.interval_s:g}\n"
        f"StartLimitBurst={policy.burst}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        # The executable's path is not subject to $ expansion (systemd reads "$$" there as two dollars).
        f"ExecStart={' '.join(systemd_quote(a, command=i > 0) for i, a in enumerate(command.argv))}\n"
        f"WorkingDirectory={str(command.cwd).replace('%', '%%')}\n"  # a path, not a quoted word
        f"{env_lines}"
        f"Restart={restart}\n"
        f"RestartSec={policy.delay_s:g}\n"
        # SIGTERM to jarvis run (it stops its services and children), SIGKILL to what is left after the grace.
        "KillMode=mixed\n"
        f"TimeoutStopSec={policy.stop_grace_s:g}\n"
        "StandardOutput=journal\n"
        "StandardError=journal\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


# -- launchd ---------------------------------------------------------------------------------------------

def launchd_plist(command: ServiceCommand, log_file: Path, policy: RestartPolicy = JARVIS_POLICY) -> dict:
    _refuse_unwritable([*command.argv, *command.env.values(), *command.env, str(command.cwd), str(log_file)])
    return {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(command.argv),
        "EnvironmentVariables": dict(command.env),
        "WorkingDirectory": str(command.cwd),
        "RunAtLoad": True,
        # launchd's on-failure: start it again unless it exited 0; ThrottleInterval spaces the starts.
        "KeepAlive": True if policy.restart == "always" else {"SuccessfulExit": False},
        "ThrottleInterval": max(1, int(policy.delay_s)),
        "ExitTimeOut": int(policy.stop_grace_s),
        "ProcessType": "Background",
        "StandardOutPath": str(log_file),
        "StandardErrorPath": str(log_file),
    }


# -- one interface ---------------------------------------------------------------------------------------

class LoginService:
    kind = ""
    path: Path

    def __init__(self, home: Path, settings: Settings):
        self.home = home
        self.settings = settings

    def render(self) -> bytes:
        raise NotImplementedError

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        try:
            done = subprocess.run(list(args), capture_output=True, text=True, timeout=60, env=child_environment())
        except FileNotFoundError:
            raise ServiceError(f"{args[0]} is not installed here, so the {self.kind} service cannot be driven") from None
        except subprocess.TimeoutExpired:
            raise ServiceError(f"`{' '.join(args)}` did not answer within 60 s") from None
        if check and done.returncode != 0:
            raise ServiceError(f"`{' '.join(args)}` failed: {(done.stderr or done.stdout).strip() or done.returncode}")
        return done

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(self.render())
        os.replace(tmp, self.path)
        return self.path

    def remove(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        for folder in self.own_folders():
            try:
                folder.rmdir()  # only when empty: nothing of anyone else's goes
            except OSError:
                pass
        return True

    def own_folders(self) -> list[Path]:
        """Folders `write` may have made for this service alone, innermost first."""
        return []

    @property
    def installed(self) -> bool:
        return self.path.is_file()

    def activate(self) -> None: ...
    def deactivate(self) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def status(self) -> str: ...
    def logs_command(self, lines: int, follow: bool) -> list[str]: ...


class SystemdUserService(LoginService):
    kind = "systemd user"

    def __init__(self, home: Path, settings: Settings, config_home: Path | None = None):
        super().__init__(home, settings)
        base = config_home or Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        self.path = base / "systemd" / "user" / UNIT_NAME

    def render(self) -> bytes:
        return systemd_unit_text(run_command(self.settings)).encode("utf-8")

    def own_folders(self) -> list[Path]:
        return [self.path.parent, self.path.parent.parent]  # systemd/user, systemd

    def activate(self) -> None:
        self._ctl("systemctl", "--user", "daemon-reload")
        self._ctl("systemctl", "--user", "enable", "--now", UNIT_NAME)

    def deactivate(self) -> None:
        self._ctl("systemctl", "--user", "disable", "--now", UNIT_NAME, check=False)
        self._ctl("systemctl", "--user", "daemon-reload", check=False)

    def start(self) -> None:
        self._ctl("systemctl", "--user", "start", UNIT_NAME)

    def stop(self) -> None:
        self._ctl("systemctl", "--user", "stop", UNIT_NAME)

    def status(self) -> str:
        done = self._ctl("systemctl", "--user", "status", "--no-pager", UNIT_NAME, check=False)
        return (done.stdout or done.stderr).strip()

    def logs_command(self, lines: int, follow: bool) -> list[str]:
        return ["journalctl", "--user", "-u", UNIT_NAME, "-n", str(lines), "--no-pager", *(["-f"] if follow else [])]


class LaunchdAgent(LoginService):
    kind = "launchd"

    def __init__(self, home: Path, settings: Settings):
        super().__init__(home, settings)
        self.path = home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
        self.log_file = home / "Library" / "Logs" / "Jarvis" / "jarvis.log"

    def render(self) -> bytes:
        return plistlib.dumps(launchd_plist(run_command(self.settings), self.log_file))

    def write(self) -> Path:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        return super().write()

    def remove(self) -> bool:
        self.log_file.unlink(missing_ok=True)
        return super().remove()

    def own_folders(self) -> list[Path]:
        return [self.log_file.parent]  # Logs/Jarvis

    @property
    def domain(self) -> str:
        return f"gui/{os.getuid()}"

    def activate(self) -> None:
        self._ctl("launchctl", "bootout", f"{self.domain}/{LAUNCHD_LABEL}", check=False)
        self._ctl("launchctl", "bootstrap", self.domain, str(self.path))

    def deactivate(self) -> None:
        self._ctl("launchctl", "bootout", f"{self.domain}/{LAUNCHD_LABEL}", check=False)

    def start(self) -> None:
        loaded = self._ctl("launchctl", "print", f"{self.domain}/{LAUNCHD_LABEL}", check=False).returncode == 0
        if not loaded:
            self._ctl("launchctl", "bootstrap", self.domain, str(self.path))
        self._ctl("launchctl", "kickstart", f"{self.domain}/{LAUNCHD_LABEL}")

    def stop(self) -> None:
        self._ctl("launchctl", "bootout", f"{self.domain}/{LAUNCHD_LABEL}")

    def status(self) -> str:
        done = self._ctl("launchctl", "print", f"{self.domain}/{LAUNCHD_LABEL}", check=False)
        return (done.stdout if done.returncode == 0 else f"not loaded ({done.stderr.strip()})").strip()

    def logs_command(self, lines: int, follow: bool) -> list[str]:
        return ["tail", "-n", str(lines), *(["-F"] if follow else []), str(self.log_file)]


def service_for_platform(settings: Settings, platform: str | None = None, home: Path | None = None) -> LoginService:
    """The login service of this system; ServiceError where there is none (Windows, Linux without systemd)."""
    platform = platform or sys.platform
    home = home or Path.home()
    if platform == "darwin":
        return LaunchdAgent(home, settings)
    if platform.startswith("linux"):
        if shutil.which("systemctl") is None:
            raise ServiceError("this Linux has no systemd (systemctl not found), so Jarvis cannot be installed as a "
                               "login service. Run `jarvis service run` from your own start-up script instead: it "
                               "keeps `jarvis run` running with the same restart policy.")
        return SystemdUserService(home, settings)
    raise ServiceError(f"Jarvis installs login services with systemd (Linux) or launchd (macOS), not on {platform}. "
                       "Run `jarvis service run` from your system's start-up mechanism instead.")
