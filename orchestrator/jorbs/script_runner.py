"""Run one jorb script in a child process (the sandbox where available) and serve its `jarvis.*` calls.

The child (script_shim.py) writes a JSON line per call on its stdout and waits for the answer on its stdin;
the parent answers each through `handle_call`, which goes to the ToolExecutor, so autonomy, confirmation and
the effects ledger apply to scripts exactly as to chat tool calls. If `handle_call` raises (a confirmation
interrupt, for instance) the child is killed and the exception propagates: the step runs again from the
start after the resume, and the calls it already made are answered from the ledger.
"""

from __future__ import annotations

import json
import logging
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from orchestrator.core import json_bounds
from orchestrator.core.child_env import child_environment

log = logging.getLogger(__name__)

SHIM = Path(__file__).with_name("script_shim.py")


class ScriptCallError(Exception):
    """The call failed in a way the script can see (and catch) as jarvis CapabilityError."""


class ScriptProcess(Protocol):
    stdin: Any
    stdout: Any
    stderr: Any

    def poll(self) -> int | None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


SpawnScript = Callable[[list[str]], ScriptProcess]


def spawn_unsandboxed(argv: list[str]) -> ScriptProcess:
    """Only where the configuration allows running without a sandbox (sandbox.required: false)."""
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8", bufsize=1, start_new_session=True, env=child_environment())


@dataclass
class ScriptOutcome:
    result: Any = None
    error: str | None = None
    traceback: str | None = None
    output: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0


def _reader(stream: Any, out: queue.Queue) -> None:
    try:
        for line in stream:
            out.put(line)
    except (OSError, ValueError):
        pass
    out.put(None)


def _drain(stream: Any, sink: list[str], limit: int = 20_000) -> None:
    size = 0
    try:
        for line in stream:
            if size < limit:
                sink.append(line)
                size += len(line)
    except (OSError, ValueError):
        pass


def run_script(
    script: str,
    handle_call: Callable[[str, str, list[Any], dict[str, Any]], Any],
    *,
    spawn: SpawnScript = spawn_unsandboxed,
    timeout_s: float = 60.0,
    python: str | None = None,
) -> ScriptOutcome:
    started = time.perf_counter()
    argv = [python or sys.executable, "-I", "-c", SHIM.read_text(encoding="utf-8")]
    proc = spawn(argv)
    lines: queue.Queue = queue.Queue()
    stderr: list[str] = []
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    threading.Thread(target=_drain, args=(proc.stderr, stderr), daemon=True).start()
    outcome = ScriptOutcome()
    deadline = time.monotonic() + timeout_s
    try:
        proc.stdin.write(json.dumps({"script": script}) + "\n")
        proc.stdin.flush()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome.error = f"TimeoutError: the script did not finish within {timeout_s:.0f} s (jorbs.script_timeout_s)"
                return outcome
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                proc.wait(timeout=5)
                tail = "".join(stderr)[-1500:]
                stopped = getattr(proc, "stopped", None)  # the sandbox stopped it (a byte budget, its timeout)
                if stopped:
                    outcome.error = f"the script was stopped: {stopped}. {tail}".strip()
                else:
                    outcome.error = f"the script process ended without a result (exit code {proc.poll()}). {tail}".strip()
                return outcome
            try:
                msg = json_bounds.loads(line)  # the script can write any line itself: a deep one too
            except ValueError:
                log.warning("jorb script wrote a line that is not JSON (or nested too deep): %r", line[:200])
                continue
            if not isinstance(msg, dict):  # the script itself can write to the pipe: any JSON may come
                log.warning("jorb script wrote a line that is not a message: %r", line[:200])
                continue
            if msg.get("type") == "done":
                outcome.result = msg.get("result")
                outcome.error = msg.get("error")
                outcome.traceback = msg.get("traceback")
                outcome.output = msg.get("output") or ""
                return outcome
            if msg.get("type") != "call":
                continue
            record = {"id": msg.get("id"), "capability": f"jarvis.{msg.get('ns')}.{msg.get('method')}",
                      "args": msg.get("args") or [], "kwargs": msg.get("kwargs") or {}}
            try:
                if not (isinstance(msg.get("ns"), str) and isinstance(msg.get("method"), str)
                        and isinstance(record["args"], list) and isinstance(record["kwargs"], dict)):
                    raise ScriptCallError(f"a malformed call on the pipe: {line[:200]}")
                result = handle_call(msg["ns"], msg["method"], record["args"], record["kwargs"])
                reply = {"id": msg.get("id"), "result": result}
                record["ok"] = True
            except ScriptCallError as exc:
                reply = {"id": msg.get("id"), "error": str(exc)}
                record["ok"] = False
                record["error"] = str(exc)
            outcome.calls.append(record)
            try:
                proc.stdin.write(json.dumps(reply, default=str) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                # Nobody reads answers any more: a call the script wrote itself and did not wait for, and it has
                # ended. What it wrote before it ended (its result) is still to be read; if it died instead, the
                # pipe's end says so.
                log.info("jorb script gone before the answer to call %r could be written: %s", msg.get("id"), exc)
    except (BrokenPipeError, OSError) as exc:
        outcome.error = f"the script process stopped talking: {exc}"
        return outcome
    finally:
        outcome.duration_ms = (time.perf_counter() - started) * 1000
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(timeout=5)
        except Exception:  # noqa: BLE001
            pass
