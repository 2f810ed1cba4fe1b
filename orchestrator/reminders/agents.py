"""Agent processes, exactly as seed 001 describes them: newline-delimited JSON-RPC over the agent's stdin/stdout.

- `process_name` is spawned once and its pipe kept open; every later reminder for it reuses the process.
- A due reminder is sent as the notification `{"jsonrpc":"2.0","method":"reminder.fire","params":{...}}`.
  The notification has no id, so ACKs (`{"jsonrpc":"2.0","result":"ok","id":null}`) are matched in order:
  one fire is outstanding per agent at a time. An agent that does not ACK in `ack_timeout_s` is stopped (a
  late ACK could otherwise be counted for the next reminder) and starts again at the next fire.
- The agent's `reminders.create` requests are answered `{"jsonrpc":"2.0","result":{"id":"rem_..."},"id":<id>}`,
  or with a JSON-RPC error (bad params, or more than `max_creates_per_hour`).
- Lines that are not JSON are logged and skipped; stderr is drained line by line into the log.
- A crashed agent fails the reminder it was handling with its exit code and last stderr lines; the scheduler
  retries with backoff and the agent is started again then.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from orchestrator.core import json_bounds
from orchestrator.core.child_env import child_environment
from .models import Reminder, utcnow
from .spec import ReminderInputError, ReminderRequest, resolve_process_name, url_within
from .targets import DeliveryDeferred, DeliveryError

log = logging.getLogger(__name__)

MAX_LINE = 1_000_000
INVALID_PARAMS, METHOD_NOT_FOUND, RATE_LIMITED = -32602, -32601, -32000


class CreateParams(BaseModel):
    """`reminders.create` params (seed 001), plus the optional fields a reminder also has."""

    model_config = ConfigDict(extra="ignore")

    title: str
    when: str
    rrule: str | None = None
    webhook_url: str | None = None
    process_name: str | None = None
    description: str | None = None
    priority: str | None = None
    project_id: str | None = None
    missed_policy: str | None = None


class RpcError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class _Waiter:
    def __init__(self) -> None:
        self.event = threading.Event()
        self.error: str | None = None

    def done(self, error: str | None = None) -> None:
        self.error = error
        self.event.set()


def command_argv(command: str) -> list[str]:
    return [command] if Path(command).is_file() else shlex.split(command)


def _short_json(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)
    return text if len(text) <= 300 else text[:297] + "..."


class _Running:
    """One started instance of an agent: its process, reader threads and outstanding fires."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.pending: deque[_Waiter] = deque()
        self.dead_reason: str | None = None
        self.stderr_tail: deque[str] = deque(maxlen=20)
        self.threads: list[threading.Thread] = []


CreateHandler = Callable[["AgentProcess", CreateParams], str]


class AgentProcess:
    def __init__(self, command: str, on_create: CreateHandler, *, ack_timeout_s: float):
        self.command = command
        self.name = Path(command_argv(command)[0]).name if command else "agent"
        self.on_create = on_create
        self.ack_timeout_s = ack_timeout_s
        self._run: _Running | None = None
        self._state = threading.Lock()      # guards _run and its pending queue
        self._write_lock = threading.Lock()  # one line at a time on stdin
        self._fire_lock = threading.Lock()   # one outstanding fire at a time (ACKs carry no id)
        self.stopping = False
        self.starts = 0

    # Lifecycle --------------------------------------------------------------------------------------------
    def _spawn(self) -> _Running:
        env = child_environment({"PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8"})  # none of Jarvis's secrets
        try:
            proc = subprocess.Popen(command_argv(self.command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, start_new_session=True)
        except (OSError, ValueError) as exc:
            raise DeliveryError(f"cannot start agent {self.command!r}: {exc}") from None
        os.set_blocking(proc.stdin.fileno(), False)  # writes wait with a deadline (select), never forever
        run = _Running(proc)
        for target, label in ((self._read_stdout, "out"), (self._drain_stderr, "err")):
            t = threading.Thread(target=target, args=(run,), name=f"agent-{self.name}-{label}", daemon=True)
            run.threads.append(t)
            t.start()
        self.starts += 1
        log.info("agent %s started (pid %s)%s", self.command, proc.pid, " again" if self.starts > 1 else "")
        return run

    def _ensure_running(self) -> _Running:
        with self._state:
            run = self._run
            if run is not None and run.dead_reason is None and run.proc.poll() is None:
                return run
            if run is not None:
                if run.proc.poll() is None:  # it closed its output but lives on: do not leave it behind
                    try:
                        os.killpg(run.proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                log.info("agent %s is not running (%s); starting it", self.command, run.dead_reason or "exited")
            self._run = self._spawn()
            return self._run

    def _kill(self, run: _Running, reason: str, grace_s: float = 2.0) -> None:
        proc = run.proc
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                try:
                    proc.wait(timeout=grace_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._mark_dead(run, reason)

    def stop(self) -> None:
        self.stopping = True
        with self._state:
            run, self._run = self._run, None
        if run is not None:
            self._kill(run, "the scheduler is stopping")
            for t in run.threads:
                t.join(timeout=2)

    def _mark_dead(self, run: _Running, reason: str) -> None:
        with self._state:
            if run.dead_reason is None:
                run.dead_reason = reason
            waiters = list(run.pending)
            run.pending.clear()
        for w in waiters:
            w.done(run.dead_reason)

    # Writing ----------------------------------------------------------------------------------------------
    def _write(self, run: _Running, obj: dict[str, Any], timeout_s: float) -> None:
        """One JSON line (ASCII: the agent may read with any encoding), waiting at most timeout_s for room."""
        data = memoryview((json.dumps(obj) + "\n").encode("ascii"))
        fd = run.proc.stdin.fileno()
        deadline = time.monotonic() + timeout_s
        with self._write_lock:
            while data:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"agent {self.command!r} did not read its stdin for {timeout_s:g} s")
                # poll, not select: select refuses a descriptor numbered 1024 or more (a busy process has them)
                poller = select.poll()
                poller.register(fd, select.POLLOUT)
                if not poller.poll(remaining * 1000):
                    continue
                try:
                    n = os.write(fd, data)
                except BlockingIOError:
                    continue
                data = data[n:]

    # Firing -----------------------------------------------------------------------------------------------
    def fire(self, params: dict[str, Any]) -> None:
        """Send `reminder.fire` and wait for the ACK. Raises DeliveryError (or DeliveryDeferred when stopping)."""
        with self._fire_lock:
            if self.stopping:
                raise DeliveryDeferred("the scheduler is stopping")
            run = self._ensure_running()
            waiter = _Waiter()
            with self._state:
                if run.dead_reason is not None:
                    raise DeliveryError(run.dead_reason)
                run.pending.append(waiter)
            try:
                self._write(run, {"jsonrpc": "2.0", "method": "reminder.fire", "params": params}, self.ack_timeout_s)
            except (BrokenPipeError, ConnectionResetError, ValueError, OSError) as exc:
                with self._state:
                    if waiter in run.pending:
                        run.pending.remove(waiter)
                reason = self._exit_reason(run, wait_s=1.0) if isinstance(exc, (BrokenPipeError, ConnectionResetError)) \
                    else f"writing to agent {self.command!r} failed: {exc}"
                self._kill(run, reason, grace_s=0.5)
                raise DeliveryError(f"broken pipe: {reason}" if isinstance(exc, BrokenPipeError) else reason) from None
            if not waiter.event.wait(self.ack_timeout_s):
                reason = (f"no ACK from agent {self.command!r} within {self.ack_timeout_s:g} s; it was stopped and "
                          "starts again at the next fire (so a late ACK is not counted for another reminder)")
                self._kill(run, reason, grace_s=0.5)
                raise DeliveryError(reason)
            if waiter.error is not None:
                if self.stopping:
                    raise DeliveryDeferred(waiter.error)
                raise DeliveryError(waiter.error)
            log.info("agent %s acknowledged reminder %s", self.name, params.get("reminder_id"))

    def _exit_reason(self, run: _Running, wait_s: float) -> str:
        try:
            code = run.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return f"agent {self.command!r} closed its stdout but kept running"
        for t in run.threads[1:]:  # the stderr drainer: its last lines explain the crash
            t.join(timeout=0.5)
        tail = " | ".join(list(run.stderr_tail)[-3:])
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"agent {self.command!r} {how}" + (f"; its last stderr: {tail}" if tail else "")

    # Reading ----------------------------------------------------------------------------------------------
    def _read_stdout(self, run: _Running) -> None:
        stream = run.proc.stdout
        skipping = False
        try:
            while True:
                raw = stream.readline(MAX_LINE)
                if not raw:
                    break
                if skipping or (len(raw) >= MAX_LINE and not raw.endswith(b"\n")):
                    if not skipping:
                        log.warning("agent %s: skipped a line longer than %d bytes", self.name, MAX_LINE)
                    skipping = not raw.endswith(b"\n")
                    continue
                self._handle_line(run, raw.decode("utf-8", "replace").strip())
        except (OSError, ValueError) as exc:
            log.debug("agent %s: stdout closed: %s", self.name, exc)
        if run.dead_reason is None:
            reason = self._exit_reason(run, wait_s=2.0)
            if not self.stopping:
                log.warning("%s", reason)
            self._mark_dead(run, reason)

    def _drain_stderr(self, run: _Running) -> None:
        try:
            # by pieces of MAX_LINE, as stdout: a line without end was held whole, however long
            for raw in iter(lambda: run.proc.stderr.readline(MAX_LINE), b""):
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    run.stderr_tail.append(line[:500])
                    log.info("agent %s stderr: %s", self.name, line[:2000])
        except (OSError, ValueError):
            pass

    def _handle_line(self, run: _Running, text: str) -> None:
        if not text:
            return
        try:
            msg = json_bounds.loads(text)
        except ValueError:
            log.warning("agent %s: skipped a line that is not JSON: %r", self.name, text[:200])
            return
        if not isinstance(msg, dict):
            log.warning("agent %s: skipped JSON that is not a JSON-RPC object: %s", self.name, _short_json(msg))
            return
        if "method" in msg:
            self._handle_call(run, msg)
        elif "result" in msg or "error" in msg:
            self._handle_ack(run, msg)
        else:
            log.warning("agent %s: skipped a JSON object with neither method nor result: %s", self.name,
                        _short_json(msg))

    def _handle_ack(self, run: _Running, msg: dict[str, Any]) -> None:
        with self._state:
            waiter = run.pending.popleft() if run.pending else None
        if waiter is None:
            log.warning("agent %s: an answer with no reminder outstanding was ignored: %s", self.name, _short_json(msg))
            return
        if "error" in msg and msg["error"] is not None:
            waiter.done(f"agent {self.name} answered with an error: {_short_json(msg['error'])}")
        elif msg.get("result") == "ok":
            waiter.done(None)
        else:
            waiter.done(f"agent {self.name} answered {_short_json(msg.get('result'))} instead of \"ok\"")

    def _handle_call(self, run: _Running, msg: dict[str, Any]) -> None:
        method, is_request, rid = msg.get("method"), "id" in msg, msg.get("id")
        try:
            if method != "reminders.create":
                raise RpcError(METHOD_NOT_FOUND, f"method not found: {method!r}; this scheduler answers "
                                                 "reminders.create")
            params = msg.get("params")
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "invalid params: reminders.create takes an object with title and when")
            try:
                create = CreateParams.model_validate(params)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
                raise RpcError(INVALID_PARAMS, f"invalid params: {problems}") from None
            result: Any = {"id": self.on_create(self, create)}
            reply: dict[str, Any] = {"jsonrpc": "2.0", "result": result, "id": rid}
        except RpcError as exc:
            log.warning("agent %s: %s refused: %s", self.name, method, exc.message)
            reply = {"jsonrpc": "2.0", "error": {"code": exc.code, "message": exc.message}, "id": rid}
        except Exception as exc:  # noqa: BLE001 - answer the agent, keep reading
            log.exception("agent %s: %s failed", self.name, method)
            reply = {"jsonrpc": "2.0", "error": {"code": -32603, "message": f"internal error: {exc}"}, "id": rid}
        if not is_request:
            return  # a notification gets no answer
        try:
            self._write(run, reply, self.ack_timeout_s)
        except (OSError, TimeoutError, ValueError) as exc:
            log.warning("agent %s: could not answer %s: %s", self.name, method, exc)


class AgentManager:
    """The agent processes of one scheduler, by command, and the `reminders.create` side of the contract."""

    def __init__(self, store: Any, *, ack_timeout_s: float, max_creates_per_hour: int,
                 on_created: Callable[[Reminder], None] | None = None, may_target: Sequence[str] = ()):
        """may_target: scheduler.agents_may_target, what an agent's reminders may fire into besides itself."""
        self.store = store
        self.may_target = list(may_target)
        self.ack_timeout_s = ack_timeout_s
        self.max_creates_per_hour = max_creates_per_hour
        self.on_created = on_created
        self._agents: dict[str, AgentProcess] = {}
        self._lock = threading.Lock()
        self.stopping = False

    def agent(self, command: str) -> AgentProcess:
        with self._lock:
            agent = self._agents.get(command)
            if agent is None:
                agent = self._agents[command] = AgentProcess(command, self._create, ack_timeout_s=self.ack_timeout_s)
            return agent

    def _create(self, agent: AgentProcess, params: CreateParams) -> str:
        created_by = f"agent:{agent.command}"
        now = utcnow()
        count = self.store.count_created_since(created_by, now - timedelta(hours=1))
        if count >= self.max_creates_per_hour:
            raise RpcError(RATE_LIMITED, f"rate limit: this agent created {count} reminders in the last hour, the "
                                         f"most allowed (scheduler.max_creates_per_hour = {self.max_creates_per_hour}); "
                                         "try again later")
        self._check_target(agent, params)
        req = ReminderRequest(title=params.title, when=params.when, rrule=params.rrule,
                              description=params.description, priority=params.priority, project_id=params.project_id,
                              missed_policy=params.missed_policy, webhook_url=params.webhook_url,
                              # seed 001: process_name defaults to the current agent
                              process_name=params.process_name or (None if params.webhook_url else agent.command))
        try:
            created = self.store.create(req, created_by=created_by, naive="utc")
        except ReminderInputError as exc:
            raise RpcError(INVALID_PARAMS, f"invalid params: {exc}") from None
        if self.on_created is not None:
            self.on_created(created)
        return created.id

    def _check_target(self, agent: AgentProcess, params: CreateParams) -> None:
        """An agent's reminder comes back to the agent itself, or goes where scheduler.agents_may_target says: a
        reminder that starts another program or POSTs to a URL is a side effect the user is asked about when the
        planner makes one (process_start, network), and no one is asked when an agent does, so an agent passing on
        what it read (a feed, a model's answer) could start any program or reach any address."""
        if params.process_name:
            try:
                wanted = resolve_process_name(params.process_name)
            except ReminderInputError as exc:
                raise RpcError(INVALID_PARAMS, f"invalid params: {exc}") from None
            allowed = set()
            for entry in self.may_target:
                try:
                    allowed.add(resolve_process_name(entry))
                except ReminderInputError:
                    continue  # a URL, or a program gone since: not this one
            if wanted != agent.command and wanted not in allowed:
                raise RpcError(INVALID_PARAMS, f"invalid params: process_name {params.process_name!r} is another "
                                               "program; an agent's reminders come back to the agent itself unless "
                                               "scheduler.agents_may_target in the config lists the program")
        if params.webhook_url and not any(url_within(params.webhook_url, entry) for entry in self.may_target):
            raise RpcError(INVALID_PARAMS, f"invalid params: webhook_url {params.webhook_url!r} is not in "
                                           "scheduler.agents_may_target; an agent's reminders come back to the agent "
                                           "itself unless the config lists where else they may go")

    def stop_all(self) -> None:
        self.stopping = True
        with self._lock:
            agents = list(self._agents.values())
        threads = [threading.Thread(target=a.stop, daemon=True) for a in agents]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)


class AgentTarget:
    kind = "agent"

    def __init__(self, manager: AgentManager):
        self.manager = manager

    def fire(self, reminder: Reminder) -> None:
        self.manager.agent(reminder.process_name or "").fire(reminder.fire_params())
