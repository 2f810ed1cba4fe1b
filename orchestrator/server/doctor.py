"""`jarvis doctor`: is this machine ready to run Jarvis, and what to do where it is not.

Each check is a small function returning a `health.Check` (ok, a problem, or not applying here) with one sentence
of what to do. The model (and whether it calls tools: one probe, llm/tool_probe.py), the data folder, the database and the disk are the health checks the server reports too;
here come the machine's own: the sandbox (bubblewrap present and working, user namespaces, cgroup delegation), the
keyring, Google's token, where email approvals go, the port, and, when a Jarvis already serves on that port, its scheduler's last tick
and its channels' state (down: the last error and the next retry), asked of its /api/health with the token of the data folder. Nothing is changed: the database is read, not
migrated; MCP servers are started to see that they answer, and stopped again.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from orchestrator.core.config import Settings
from orchestrator.core.local_peer import listener_uid  # the token goes only to a server of this user
from .health import (Check, backup_check, data_folder_check, disk_check, guarded, mcp_checks, model_check,
                     storage_check, tool_calls_check)


def sandbox_check(settings: Settings) -> Check:
    if sys.platform == "darwin":
        found = shutil.which("sandbox-exec") or Path("/usr/bin/sandbox-exec").exists()
        return Check("sandbox", bool(found), "sandbox-exec " + ("is there" if found else "is missing"),
                     None if found else "sandbox-exec ships with macOS; reinstall the command line tools.")
    if not sys.platform.startswith("linux"):
        return Check("sandbox", None, f"no sandbox backend for {sys.platform}")
    bwrap = shutil.which("bwrap")
    required = settings.sandbox.required
    if bwrap is None:
        return Check("sandbox", False if required else None,
                     "bubblewrap (bwrap) is not installed" + ("" if required else "; sandbox.required is false, so "
                                                              "generated code runs with resource limits only"),
                     "Install bubblewrap: scripts/install-system-deps.sh bubblewrap (or apt-get install bubblewrap).")
    from jarb_core.sandbox import Sandbox, SandboxUnavailable

    try:  # the sandbox generated code gets: it runs `true` in bubblewrap once and says why that failed
        Sandbox(required=True, backend="bubblewrap", unprivileged_uid=settings.sandbox.unprivileged_uid)
    except SandboxUnavailable as exc:
        return Check("sandbox", False, f"{exc}{_userns_note()}",
                     "Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
                     "kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu), or run Jarvis outside this container.")
    return Check("sandbox", True, f"bubblewrap works ({bwrap})")


def _userns_note() -> str:
    for path, bad in (("/proc/sys/kernel/unprivileged_userns_clone", "0"),
                      ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
                      ("/proc/sys/user/max_user_namespaces", "0")):
        try:
            if Path(path).read_text().strip() == bad:
                return f" ({path} is {bad}: user namespaces are switched off)"
        except OSError:
            continue
    return ""


def cgroup_check(settings: Settings) -> Check:
    if not sys.platform.startswith("linux"):
        return Check("cgroups", None, "only used on Linux")
    from orchestrator.core import cgroups

    missing = cgroups.missing()
    if not missing:
        return Check("cgroups", True, "memory, pids and cpu limits hold for a sandboxed run's whole process tree")
    detail = "; ".join(f"{c}: {why}" for c, why in sorted(missing.items()))
    return Check("cgroups", False, f"not delegated to Jarvis: {detail}",
                 "Run Jarvis as a systemd user service (`jarvis service install`: user services get a delegated "
                 "cgroup), or start it with `systemd-run --user -p Delegate=yes`; until then each process is "
                 "limited on its own.")


def keyring_check(settings: Settings) -> Check:
    from orchestrator.core.secrets import backend_info

    info = backend_info()
    if info.get("missing"):  # optional: secrets still come from the environment, so a note, not a failure
        return Check("keyring", None, f"no keyring on this machine (optional): to keep secrets here, {info['fix']}")
    if info.get("plaintext"):
        return Check("keyring", False, f"{info['name']}: {info['problem']}",
                     "Switch to a real keyring; `jarvis secrets` says which one is in use.")
    return Check("keyring", True, str(info.get("name")))


def google_check(settings: Settings) -> Check:
    """Signed in, and the stored token still renews (google_auth.sign_in_check: the same check as
    `jarvis accounts test google`)."""
    from orchestrator.tools.google_auth import sign_in_check

    ok, detail, fix = sign_in_check(settings)
    return Check("Google", ok, detail, fix if ok is False else None)


def _running_jarvis(settings: Settings) -> str | None:
    """The base URL of a Jarvis serving on server.port, if /healthz there answers as Jarvis does."""
    import httpx

    host = settings.server.host if settings.server.host not in ("0.0.0.0", "::") else "127.0.0.1"
    base = f"http://{f'[{host}]' if ':' in host else host}:{settings.server.port}"
    try:
        resp = httpx.get(base + "/healthz", timeout=3)
        if resp.json().get("service") != "jarvis":
            return None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return base


def port_check(settings: Settings) -> Check:
    host, port = settings.server.host, settings.server.port
    if port == 0:
        return Check("port", True, "server.port is 0: any free port")
    if _running_jarvis(settings) is not None:
        owner = listener_uid(port)
        if owner is not None and owner != os.geteuid():
            return Check("port", False, f"{host}:{port} is held by a program of another user (uid {owner}) that answers "
                         "like Jarvis", "Stop that program, or pick another port with server.port.")
        return Check("port", True, f"{host}:{port} is served by a running Jarvis")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return Check("port", False, f"{host}:{port} is taken by another program ({exc.strerror or exc})",
                         "Stop that program, or pick another port with server.port (or `jarvis run --port N`).")
    return Check("port", True, f"{host}:{port} is free")


def _running_report(settings: Settings, what: str) -> list[dict] | Check:
    """The running Jarvis's /api/health checks, asked with the token of the data folder once it is sure the
    listener is this user's; else a Check for `what` saying why they could not be asked."""
    base = _running_jarvis(settings)
    if base is None:
        return Check(what, None, "Jarvis is not running here, so nothing is polled or fires until it is (`jarvis "
                     "service install` keeps it running)")
    owner = listener_uid(settings.server.port)
    if owner is None:
        return Check(what, None, f"a Jarvis answers at {base}, but which user runs it cannot be told here, so "
                     "its token is not sent to ask; Settings in the UI shows the services")
    if owner != os.geteuid():
        return Check(what, False, f"the program on port {settings.server.port} answers like Jarvis but runs as "
                     f"another user (uid {owner}); the token was not sent to it",
                     "Stop that program (it may be trying to collect your token), then start Jarvis.")
    import httpx

    from .security import TOKEN_FILE

    try:
        token = Path(settings.data_dir, TOKEN_FILE).read_text(encoding="utf-8").strip()
        resp = httpx.get(base + "/api/health", headers={"Authorization": f"Bearer {token}"}, timeout=20)
        resp.raise_for_status()
        return list(resp.json()["checks"])
    except (OSError, httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return Check(what, False, f"the running Jarvis at {base} did not report its {what}: {exc}",
                     "Check `jarvis service logs` (or the terminal of `jarvis run`).")


def _reported(found: dict) -> Check:
    return Check(found["name"], found["ok"], found["detail"], found.get("fix"), found.get("last_error"))


def scheduler_check(settings: Settings) -> Check:
    if not settings.scheduler.enabled:
        return Check("scheduler", None, "switched off (scheduler.enabled: false)")
    report = _running_report(settings, "scheduler")
    if isinstance(report, Check):
        return report
    found = next((c for c in report if c.get("name") == "scheduler"), None)
    if found is None:
        return Check("scheduler", False, "the running Jarvis did not report its scheduler",
                     "Check `jarvis service logs` (or the terminal of `jarvis run`).")
    return _reported(found)


def channels_check(settings: Settings) -> list[Check]:
    """The channels as the running Jarvis sees them: up, or down with the last error and when it retries."""
    enabled = [n for n, cfg in (("telegram", settings.channels.telegram), ("matrix", settings.channels.matrix),
                                ("email", settings.channels.email)) if cfg.enabled]
    if not enabled:
        return []
    report = _running_report(settings, "channels")
    if isinstance(report, Check):
        return [report]
    return [_reported(c) for c in report if c.get("name") in {f"channel {n}" for n in enabled}]


def email_approvals_check(settings: Settings) -> Check:
    """confirmations.notify.email must not be the Gmail account Jarvis reads (approvals/remote.own_account_problem)."""
    notify = settings.confirmations.notify
    if "email" not in notify.to:
        return Check("email approvals", None, "not configured (confirmations.notify.to has no email)")
    from orchestrator.approvals.remote import own_account_problem
    from orchestrator.channels.email import email_poller

    try:
        account = email_poller(settings, lambda *a: None, lambda: []).me()
    except Exception as exc:  # noqa: BLE001 - said, not raised: the other checks still run
        return Check("email approvals", None, f"the Gmail account could not be read to compare ({exc})")
    problem = own_account_problem(account, notify.email)
    if problem:
        return Check("email approvals", False, problem, "Set confirmations.notify.email to another address of yours.")
    return Check("email approvals", True, f"sent to {notify.email}, read from {account}")


def mcp_servers(settings: Settings) -> list[Check]:
    """Starts the servers in a manager of its own, to see that they answer, and stops them again."""
    from orchestrator.mcp.manager import McpManager

    manager = McpManager(settings)
    try:
        return mcp_checks(settings, manager, start=True)
    finally:
        manager.shutdown()


CHECKS: list[Callable[[Settings], Check | list[Check]]] = [
    model_check, tool_calls_check, data_folder_check, storage_check, disk_check, sandbox_check, cgroup_check,
    mcp_servers, keyring_check, google_check, email_approvals_check, port_check, scheduler_check, channels_check,
    backup_check,
]


def run_checks(settings: Settings) -> list[Check]:
    out: list[Check] = []
    for check in CHECKS:
        found = guarded(check.__name__.removesuffix("_check"), lambda check=check: check(settings))  # type: ignore[arg-type,return-value]
        out.extend(found if isinstance(found, list) else [found])
    return out


def all_pass(checks: list[Check]) -> bool:
    return all(c.ok is not False for c in checks)

