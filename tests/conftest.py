"""Shared fixtures: the scripted model server, an isolated Jarvis home per test, and a CLI runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_forks import Zygote
from tests.fakes.llm_server import FakeLLMServer

REPO = Path(__file__).resolve().parent.parent
# Real-world data (pypdf's PDFs, recorded YouTube responses), fetched from the package registry by
# scripts/fetch_test_corpus.py, which `make test` runs; JARVIS_TEST_CORPUS points elsewhere.
CORPUS = Path(os.environ.get("JARVIS_TEST_CORPUS") or REPO / ".cache" / "corpus")
JARVIS_BIN = Path(sys.executable).parent / "jarvis"
# JARVIS_TEST_FRESH_CLI=1: each `jarvis` command of a test in a fresh interpreter, not a fork of the CLI zygote.
FRESH_CLI = os.environ.get("JARVIS_TEST_FRESH_CLI") == "1"


def pytest_configure(config: pytest.Config) -> None:
    if not CORPUS.is_dir():
        raise pytest.UsageError(f"the real-world test data is not in {CORPUS}: run `make test-corpus` (or "
                                "`make test`, which fetches it), or point JARVIS_TEST_CORPUS at a copy")
    if hasattr(config, "workerinput") and not FRESH_CLI:  # an xdist worker: its first `jarvis` command will come
        Zygote.shared(REPO)


@pytest.hookimpl(trylast=True)  # after `-m` and `-k` have deselected: the runs below are of what will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests marked `long` (minutes each: a real model's turns) start first, one worker each in turn.

    xdist's worksteal gives each worker a contiguous run of the collection at the start (the first len // n, then
    what is left // (n - 1), ...) and an idle worker steals from the end of another's. Where collection order
    puts a long test late in a run, it may start minutes before the others finish and end the run after them; at
    the head of a run it starts at once, and stealing never takes it."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    long = [item for item in items if item.get_closest_marker("long")]
    if workers < 2 or not long:
        return
    rest = iter([item for item in items if not item.get_closest_marker("long")])
    ordered: list[pytest.Item] = []
    left = len(items)
    for worker in range(workers):
        size = left // (workers - worker)
        heads = long[worker::workers]
        ordered += heads + [next(rest) for _ in range(max(0, size - len(heads)))]
        left -= size
    ordered += list(rest)
    assert len(ordered) == len(items)
    items[:] = ordered


@pytest.fixture(autouse=True)
def _isolated_keyring(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file keyring in a temporary folder, so tests never touch the user's real keyring."""
    home = tmp_path_factory.mktemp("keyring")
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
    monkeypatch.setenv("XDG_DATA_HOME", str(home))


@pytest.fixture
def llm_server():
    with FakeLLMServer() as server:
        yield server


@dataclass
class JarvisEnv:
    """An isolated Jarvis: its own config file, data folder and file root, pointed at the scripted server."""

    path: Path
    config_path: Path
    root: Path
    data: Path
    server: FakeLLMServer | None

    def write_config(self, **overrides: Any) -> None:
        cfg: dict[str, Any] = {
            "models": {"primary": {"base_url": self.server.base_url if self.server else "http://127.0.0.1:9/v1",
                                   "model": "scripted-model", "api_key": "test", "max_retries": 0, "timeout_s": 20}},
            "storage": {"data_dir": str(self.data)},
            "tools_dir": str(self.path / "tools"),
            "mcp": {"dir": str(self.path / "mcp")},
            "fs": {"roots": [str(self.root)]},
            "sandbox": {"required": False},
        }
        for key, value in overrides.items():
            if isinstance(value, dict) and isinstance(cfg.get(key), dict):
                cfg[key] = _merge(cfg[key], value)
            else:
                cfg[key] = value
        self.config_path.write_text(yaml.safe_dump(cfg), encoding="utf-8")

    @property
    def settings(self):
        from orchestrator.core.config import load_settings

        return load_settings(self.config_path)

    def app(self, **kwargs: Any):
        """A new App (orchestrator/app.py) over this environment's settings; kwargs go to App."""
        from orchestrator.app import App

        return App(self.settings, **kwargs)

    def graph(self, **kwargs: Any):
        return self.app(**kwargs).graph

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["JARVIS_CONFIG"] = str(self.config_path)
        env["PYTHONPATH"] = str(REPO)
        return env

    def cli(self, *args: str, input: str | None = None, timeout: float = 120, check: bool = False,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """`jarvis ARGS` as a process of its own, in this environment (or `env`, whole), its output captured."""
        from orchestrator.storage import writer

        writer.flush()  # the other process reads what this one's turns wrote, even what is still queued
        env = env if env is not None else self.env()
        if FRESH_CLI:
            proc = subprocess.run([str(JARVIS_BIN), *args], input=input, capture_output=True, text=True,
                                  timeout=timeout, env=env, cwd=str(self.path),
                                  stdin=None if input is not None else subprocess.DEVNULL)
        else:  # a fork of an interpreter that has imported Jarvis already: tests/cli_forks.py says why and what differs
            proc = Zygote.shared(REPO).run(str(JARVIS_BIN), list(args), env=env, cwd=str(self.path), input=input,
                                           timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"jarvis {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args: str, stdin: int = subprocess.DEVNULL, stdout: int = subprocess.PIPE,
              stderr: int = subprocess.PIPE, text: bool = False) -> Any:
        """`jarvis ARGS` started and left running, as subprocess.Popen (a terminal's side, PIPE or DEVNULL for each
        stream): a fork of the CLI zygote, like `cli`."""
        from orchestrator.storage import writer

        writer.flush()
        if FRESH_CLI:
            return subprocess.Popen([str(JARVIS_BIN), *args], stdin=stdin, stdout=stdout, stderr=stderr, text=text,
                                    env=self.env(), cwd=str(self.path))
        return Zygote.shared(REPO).popen(str(JARVIS_BIN), list(args), env=self.env(), cwd=str(self.path), stdin=stdin,
                                         stdout=stdout, stderr=stderr, text=text)

    def cli_here(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        """The same command run in this process (Typer's runner): no interpreter start-up and no imports, which
        cost seconds a process on a busy machine. For the reads and refusals between the steps a test runs as real
        processes (`cli`): what those wrote is read back from the storage all the same."""
        from typer.testing import CliRunner

        from orchestrator.cli import app
        from orchestrator.storage import writer

        writer.flush()  # as for a process: it reads what this one's turns wrote, even what is still queued
        ran = CliRunner().invoke(app, ["--config", str(self.config_path), *args], input=input)
        if ran.exception is not None and not isinstance(ran.exception, SystemExit):
            raise ran.exception
        return subprocess.CompletedProcess(["jarvis", *args], ran.exit_code, ran.stdout, ran.stderr)

    def cli_here_json(self, *args: str) -> Any:
        ran = self.cli_here(*args)
        assert ran.returncode == 0, ran.stderr
        return json.loads(ran.stdout)

    def cli_until(self, done: Callable[[str], Any], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        """`jarvis *args` (a service that runs until stopped: the scheduler, say) until `done(its stderr so far)`
        holds, then stopped as Ctrl-C stops it. The test waits for the outcome, bounded generously, never for a fixed
        time: how long the work takes depends on the machine's load. Fails with the service's output if it ends
        first or times out."""
        from orchestrator.storage import writer

        writer.flush()
        out, err = (open(self.path / f"cli-{os.getpid()}-{time.monotonic_ns()}.{n}", "w+", encoding="utf-8")
                    for n in ("out", "err"))  # files, not pipes: a chatty service never blocks on a full pipe
        with out, err:
            proc = subprocess.Popen([str(JARVIS_BIN), *args], stdout=out, stderr=err, text=True, env=self.env(),
                                    cwd=str(self.path), stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + timeout
            try:
                while not done(Path(err.name).read_text(encoding="utf-8", errors="replace")):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        why = f"exited {proc.returncode}" if proc.returncode is not None else f"not done in {timeout} s"
                        raise AssertionError(f"jarvis {' '.join(args)}: {why}\n{Path(err.name).read_text()[-4000:]}")
                    time.sleep(0.1)
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=timeout)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())

    def cli_json(self, *args: str) -> Any:
        proc = self.cli(*args, check=True)
        return json.loads(proc.stdout)


def _merge(base: dict, overlay: dict) -> dict:
    out = dict(base)
    for k, v in overlay.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.fixture
def jarvis_env(tmp_path: Path, llm_server: FakeLLMServer) -> Iterator[JarvisEnv]:
    from orchestrator.storage import engines as storage

    root = tmp_path / "root"
    root.mkdir()
    env = JarvisEnv(tmp_path, tmp_path / "config.yml", root, tmp_path / "data", llm_server)
    env.write_config()
    yield env
    # Engines are kept per database URL for the process (one per file in use); each test's files are new, so
    # without this a worker kept every test's SQLite files open and passed 1,024 descriptors.
    storage.dispose_all()


@pytest.fixture
def descriptors_past_1024():
    """This process holds descriptors numbered past 1,024, as a long-running Jarvis (or a test worker) can."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit here is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200) if soft != resource.RLIM_INFINITY else soft, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model response calling one tool."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def answer(text: str) -> dict[str, Any]:
    return {"content": text}


@pytest.fixture(scope="session")
def sample_pdfs(tmp_path_factory: pytest.TempPathFactory):
    """Real PDFs (1, 50, 500 pages, encrypted, scanned-like, truncated, garbage, not a PDF), made once per run."""
    from tests.fakes.pdfs import make_samples

    return make_samples(tmp_path_factory.mktemp("pdfs"))


@pytest.fixture
def google_server():
    """A local fake of Google's OAuth, Gmail and Calendar endpoints (tests/fakes/google_server.py)."""
    from tests.fakes.google_server import FakeGoogle

    with FakeGoogle() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session (tests/pg_server.py); skipped with a reason where there is none."""
    from tests.pg_server import postgres_session

    yield from postgres_session()


@pytest.fixture
def pg_env(jarvis_env: JarvisEnv, postgres_server) -> JarvisEnv:
    """jarvis_env with storage.url on a fresh PostgreSQL database."""
    from orchestrator.storage import engines as storage

    jarvis_env.pg_url = postgres_server.new_database()
    jarvis_env.write_config(storage={"url": jarvis_env.pg_url})
    yield jarvis_env
    storage.dispose_all()


def wait_until_up(base_url: str, timeout_s: float = 300.0) -> None:
    """Wait for a `jarvis run` that printed its URL to have finished starting (server/starting.py: its port
    answers at once, /healthz says "starting" until the full app is there). Bounded generously: a busy machine
    is slow, not broken."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            reply = httpx.get(base_url.rstrip("/") + "/healthz", timeout=10)
            if reply.status_code == 200 and reply.json().get("status") == "up":
                return
            last = reply.text
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.1)
    raise AssertionError(f"jarvis run at {base_url} did not finish starting in {timeout_s:.0f} s: {last}")
