"""An outside model server that Jarvis starts and watches: `models.primary.start: [llama-server, -m, ...]` (or
`ollama serve`), for users who want `jarvis run` (and so the login service) to bring their model up too.

`jarvis run` calls `start_configured(settings)` before it checks the endpoint: a role whose endpoint already
answers is left alone (the user, or a previous Jarvis, runs it); otherwise the command is started under the
supervisor's restart policy (always restarted, with a start limit), its output goes to
`data/model-server-<role>.log`, and `jarvis run` waits up to `start_timeout_s` for GET /models to answer. The server
stops with Jarvis, and is killed with it when Jarvis is killed (PR_SET_PDEATHSIG on Linux).
"""

from __future__ import annotations

import logging
import time
from typing import IO

from orchestrator.core.config import Settings
from orchestrator.core.child_env import child_environment
from orchestrator.core.supervisor import RestartPolicy, Supervisor

from .client import check_endpoint, model_config

log = logging.getLogger(__name__)

MODEL_SERVER_POLICY = RestartPolicy(restart="always", delay_s=2.0, burst=5, interval_s=120.0, stop_grace_s=10.0)

_running: dict[str, "OutsideModelServer"] = {}


class OutsideModelServer:
    def __init__(self, settings: Settings, role: str):
        self.settings = settings
        self.role = role
        _, self.cfg = model_config(settings, role)  # type: ignore[arg-type]
        self.log_path = settings.data_path(f"model-server-{role}.log")
        self._log: IO[bytes] | None = None
        self.supervisor: Supervisor | None = None

    def start(self) -> "OutsideModelServer":
        self._log = open(self.log_path, "ab")
        self.supervisor = Supervisor(self.cfg.start or [], MODEL_SERVER_POLICY, name=f"model server ({self.role})",
                                     env=child_environment(), stdout=self._log, stderr=self._log,
                                     on_event=lambda text: log.warning("%s", text))
        self.supervisor.start()
        _running[self.role] = self
        return self

    def wait_ready(self) -> tuple[bool, str]:
        """Until GET /models answers, the command gives up, or start_timeout_s passes."""
        deadline = time.monotonic() + self.cfg.start_timeout_s
        ok, message = check_endpoint(self.settings, self.role)  # type: ignore[arg-type]
        while not ok and time.monotonic() < deadline:
            if self.supervisor is not None and self.supervisor.gave_up:
                return False, f"{self.supervisor.gave_up}; its output is in {self.log_path}"
            time.sleep(0.5)
            ok, message = check_endpoint(self.settings, self.role)  # type: ignore[arg-type]
        if not ok:
            message += f" (the server Jarvis started did not answer within {self.cfg.start_timeout_s:g} s; its output " \
                       f"is in {self.log_path})"
        return ok, message

    def describe(self) -> str:
        sup = self.supervisor
        if sup is None:
            return "not started"
        if sup.gave_up:
            return sup.gave_up
        pid = sup.proc.pid if sup.running and sup.proc else None
        restarts = max(0, sup.starts - 1)
        return (f"started by Jarvis ({' '.join(self.cfg.start or [])[:80]}" + (f", pid {pid}" if pid else ", not running")
                + (f", restarted {restarts} time(s), last {sup.last_exit}" if restarts else "") + ")")

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop()
        if self._log is not None:
            self._log.close()
        _running.pop(self.role, None)


def running(role: str) -> OutsideModelServer | None:
    return _running.get(role)


def start_configured(settings: Settings) -> list[OutsideModelServer]:
    """Start each role's `start` command whose endpoint does not answer yet, and wait for it to answer."""
    started = []
    for role in ("primary", "heavy"):
        cfg = settings.models.primary if role == "primary" else settings.models.heavy
        if cfg is None or not cfg.start or running(role) is not None:
            continue
        if check_endpoint(settings, role)[0]:  # type: ignore[arg-type]
            log.info("the %s model already answers at %s; its start command is not run", role, cfg.base_url)
            continue
        server = OutsideModelServer(settings, role).start()
        ok, message = server.wait_ready()
        if not ok:
            log.warning("%s", message)
        started.append(server)
    return started
