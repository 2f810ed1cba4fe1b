"""`jarvis` commands as a user runs them, for the tests of what a command imports and of `jarvis run`'s address:
one in a fresh interpreter (not a fork of the CLI zygote, which has imported Jarvis already), and a real
`jarvis run` on a free port."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from typing import Any

from tests.conftest import JARVIS_BIN


def fresh_cli(jarvis_env: Any, args: list[str], watched: tuple[str, ...], env: dict[str, str] | None = None,
              stdin: Any = subprocess.DEVNULL) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`jarvis ARGS` in a fresh interpreter: its exit code and output, and which of the `watched` modules it
    imported."""
    probe = ("import sys, json\nfrom orchestrator.cli import main\n"
             f"sys.argv = ['jarvis', *{list(args)!r}]\n"
             "code = 0\ntry:\n    main()\nexcept SystemExit as exit:\n    code = exit.code\n"
             f"print('\\nLOADED', json.dumps([m for m in {watched!r} if m in sys.modules]), flush=True)\n"
             "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", probe], env=env or jarvis_env.env(), capture_output=True, text=True,
                          timeout=300, stdin=stdin, cwd=str(jarvis_env.path))
    said, _, loaded = proc.stdout.rpartition("\nLOADED ")
    assert loaded, (proc.stdout, proc.stderr)
    return subprocess.CompletedProcess(proc.args, proc.returncode, said, proc.stderr), json.loads(loaded)


def start_jarvis_run(jarvis_env: Any) -> tuple[subprocess.Popen, str]:
    """A real `jarvis run --port 0` over jarvis_env, and its base URL as it printed it (it may still be starting)."""
    proc = subprocess.Popen([str(JARVIS_BIN), "run", "--port", "0", "--no-open", "--no-services"],
                            env=jarvis_env.env(), cwd=str(jarvis_env.path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    line = proc.stdout.readline() if proc.stdout else ""
    started = re.search(r"running at (http://[^/\s]+)", line)
    if not started:
        proc.kill()
        raise AssertionError(line + (proc.stderr.read() if proc.stderr else ""))
    return proc, started.group(1)


def stop_jarvis_run(proc: subprocess.Popen, wait_s: float = 60) -> None:
    """Ctrl-C, as a user stops it (it removes its recorded address); killed if it does not stop."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
