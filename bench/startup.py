"""How long a newcomer waits: seconds from `jarvis run` to its /healthz answering and to the first token of a first
message (the scripted model, so the time is Jarvis's), and of `jarvis pending` and a one-shot `jarvis chat`, each
beside `jarvis --version` (the interpreter and the command line alone) measured in the same run. The one-shot chat is
measured twice: with no `jarvis run` (the command builds the graph itself) and while one serves the same data folder
(the turn goes through it: cli/via_server.py).

Goals: /healthz <= 3 s; `pending` <= 2 s; a one-shot chat's overhead over the model's own time <= 2 s.
Each figure is the median of RUNS starts, alternated with `--version` so background load hits both alike.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from _common import REPO, report

sys.path.insert(0, str(REPO))
from tests.fakes.llm_server import FakeLLMServer  # noqa: E402 - the scripted model server of the tests

JARVIS = Path(sys.executable).parent / "jarvis"
RUNS = int(os.environ.get("BENCH_STARTUP_RUNS", "5"))


def _home(server: FakeLLMServer) -> tuple[Path, dict[str, str]]:
    base = Path(tempfile.mkdtemp(prefix="jarvis-bench-startup-"))
    (base / "root").mkdir()
    config = {"models": {"primary": {"base_url": server.base_url, "model": "scripted-model", "api_key": "x",
                                     "max_retries": 0}, "fallback": False},
              "storage": {"data_dir": str(base / "data")}, "fs": {"roots": [str(base / "root")]},
              "tools_dir": str(base / "tools"), "mcp": {"dir": str(base / "mcp")}, "sandbox": {"required": False}}
    (base / "config.yml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "JARVIS_CONFIG": str(base / "config.yml"), "PYTHONPATH": str(REPO)}
    return base, env


def _seconds(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([str(JARVIS), *args], env=env, capture_output=True, timeout=300, check=False,
                   stdin=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _run_until_answering(env: dict[str, str], server: FakeLLMServer) -> tuple[float, float, float, float]:
    """(healthz 200, the full app up, the first token of a first message), in seconds from the command, and the
    seconds of a one-shot `jarvis chat` sent through this running Jarvis (cli/via_server.py)."""
    said = tempfile.TemporaryFile("w+")  # what `jarvis run` says on its terminal, shown if it stops
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(JARVIS), "run", "--port", "0", "--no-open", "--no-services"], env=env,
                            stdout=subprocess.PIPE, stderr=said, text=True, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()
        base, token = re.search(r"running at (http://[^/]+)/\?token=(\S+)", line).groups()
        healthz = up = None
        with httpx.Client(base_url=base, timeout=300, headers={"Authorization": f"Bearer {token}"}) as client:
            while up is None:
                if proc.poll() is not None:  # a Jarvis that stopped never answers: polling on would spin forever
                    said.seek(0)
                    raise RuntimeError(f"jarvis run exited {proc.returncode} before it was up: {said.read()[-2000:]}")
                try:
                    status = client.get("/healthz").json().get("status")
                except httpx.TransportError:
                    time.sleep(0.02)  # not a busy loop on the cores the measured server starts on
                    continue
                healthz = healthz or time.perf_counter() - t0
                if status == "up":
                    up = time.perf_counter() - t0
                else:
                    time.sleep(0.02)
            server.push({"content": "Hello there."})
            with client.stream("POST", "/api/threads/bench-first/messages", json={"text": "hi"}) as stream:
                for chunk in stream.iter_lines():
                    if chunk.startswith("data:") and "token" in chunk:
                        first = time.perf_counter() - t0
                        break
                else:
                    raise RuntimeError("no token came back")
        server.push({"content": "One answer."})
        via = _seconds(["chat", "hello"], env)
        return healthz, up, first, via
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        said.close()


def main() -> None:
    with FakeLLMServer() as server:
        _, env = _home(server)
        version, pending, chat, healthz, up, first, via = [], [], [], [], [], [], []
        _seconds(["--version"], env)  # the first start fills the OS's file cache: not a newcomer's second start
        for _ in range(RUNS):
            version.append(_seconds(["--version"], env))
            pending.append(_seconds(["pending"], env))
            server.push({"content": "One answer."})
            chat.append(_seconds(["chat", "hello"], env))
            h, u, f, v = _run_until_answering(env, server)
            via.append(v)
            healthz.append(h)
            up.append(u)
            first.append(f)
    med = {name: statistics.median(values) for name, values in
           (("version", version), ("pending", pending), ("chat", chat), ("healthz", healthz), ("up", up),
            ("first", first), ("chat_via_run", via))}
    report("startup", {"jarvis --version (s)": med["version"], "jarvis run -> /healthz 200 (s)": med["healthz"],
                       "jarvis run -> every part up (s)": med["up"],
                       "jarvis run -> first token of a first message (s)": med["first"],
                       "jarvis pending (s)": med["pending"], "jarvis chat, one shot, in-process (s)": med["chat"],
                       "jarvis chat, one shot, through a running jarvis run (s)": med["chat_via_run"]},
           med["healthz"] / med["version"], "healthz <= 3 s", med["healthz"] <= 3)
    print(f"  goals: healthz {med['healthz']:.2f} s <= 3 s: {'OK' if med['healthz'] <= 3 else 'MISSED'}; "
          f"pending {med['pending']:.2f} s <= 2 s: {'OK' if med['pending'] <= 2 else 'MISSED'}; one-shot chat "
          f"{med['chat']:.2f} s (the scripted model answers at once, so all of it is Jarvis's) <= 2 s: "
          f"{'OK' if med['chat'] <= 2 else 'MISSED'}; through `jarvis run` {med['chat_via_run']:.2f} s <= 2 s: "
          f"{'OK' if med['chat_via_run'] <= 2 else 'MISSED'}")
    print(json.dumps({k: round(v, 3) for k, v in med.items()}))


if __name__ == "__main__":
    main()
