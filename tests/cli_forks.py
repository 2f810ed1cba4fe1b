"""`jarvis` commands for the tests as real processes, forked from an interpreter that has already imported Jarvis.

A test that runs `jarvis memory list` as a process proves what another process reads and says: exit code, stdout,
stderr, what it wrote to the data folder. Starting a fresh interpreter for it cost 5-19 s here on a busy machine
(importing LangChain, LangGraph, OpenAI's types and pydantic models: the same work every time), and the suite runs
about 200 of them. Here one interpreter per test process imports every module of Jarvis once (the "zygote"), and
each command is a fork of it: its own process, its own pid, file descriptors (a terminal's side included),
environment, working folder, default Ctrl-C handling and exit code, running the same `orchestrator.cli:main` the
`jarvis` script runs, and exiting the way an interpreter exits (atexit handlers, non-daemon threads joined, streams
flushed).

What a fork cannot prove is how a fresh interpreter starts (which modules a command imports, how fast), nor anything
a module decides at import from its environment (the zygote refuses to serve when a preloaded module opened the
keyring): the tests of start-up (tests/test_run_startup.py, bench/startup.py) start `jarvis` itself, as do the tests
of `jarvis run` and `jarvis mcp serve`.

The zygote is single-threaded when it forks (checked at start); each request gets a reaper, a fork of the zygote
that forks the command, sends its pid, waits for it and sends its exit status, so the zygote itself never waits.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

# Imported once in the zygote: every module of these packages (each import is CPU work a fresh process would repeat,
# and a command imports hundreds of them lazily), but the scripts that run in a child process of their own.
PRELOAD_PACKAGES = ("orchestrator", "integrations")
NOT_PRELOADED = ("orchestrator.jorbs.script_shim", "integrations.pdf_child",
                 "orchestrator.platform_graph")  # builds an App from the default config when imported


def serve(socket_path: str) -> int:
    """The zygote's loop (run in its own interpreter by `Zygote`): returns only in a forked command, with its exit
    code, so that the command's process exits through the interpreter's normal shutdown."""
    streams = (sys.stdin, sys.stdout, sys.stderr)
    _preload()
    if threading.active_count() != 1:  # a fork copies only the forking thread: another one's locks would be held
        print(f"cli zygote: importing Jarvis started threads {threading.enumerate()}", file=sys.stderr)
        return 70
    import keyring.core

    if keyring.core._keyring_backend is not None:  # chosen by the zygote's environment, not the command's
        print("cli zygote: a preloaded module opened the keyring when imported (add it to NOT_PRELOADED)",
              file=sys.stderr)
        return 70
    if (sys.stdin, sys.stdout, sys.stderr) != streams:
        print("cli zygote: a preloaded module replaced a standard stream (a script module: add it to NOT_PRELOADED)",
              file=sys.stderr)
        return 70
    import gc

    gc.freeze()  # the collector leaves the preloaded objects alone: touching them would copy every page in each fork
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reapers are reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        header, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        if os.fork() == 0:
            listener.close()
            return _reaper(conn, json.loads(header), fds)
        conn.close()
        for fd in fds:
            os.close(fd)


def _preload() -> None:
    import importlib
    import pkgutil

    for package in PRELOAD_PACKAGES:
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
            if info.name in NOT_PRELOADED or info.name.endswith(".__main__"):
                continue
            try:
                importlib.import_module(info.name)
            except ImportError:  # an optional part not installed: the command that needs it imports it and says so
                pass


def _reaper(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    child = os.fork()
    if child == 0:
        conn.close()
        return _command(request, fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": child}).encode() + b"\n")
    _, status = os.waitpid(child, 0)
    conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    os._exit(0)


def _command(request: dict[str, Any], fds: list[int]) -> int:
    """In the forked command: become the process `jarvis ARGS` would be, run the CLI, return its exit code."""
    import io

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    streams = []
    for fd, mode in ((0, "rb"), (1, "wb"), (2, "wb")):
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = io.BufferedReader(raw) if mode == "rb" else io.BufferedWriter(raw)
        streams.append(io.TextIOWrapper(buffered, encoding="utf-8", errors="backslashreplace" if fd == 2 else "strict",
                                        line_buffering=fd == 2 or os.isatty(fd)))
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
    sys.argv = [request["argv0"], *request["args"]]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from orchestrator.cli import main

    try:
        main()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


class Zygote:
    """One per test process, started at its first command (or when an xdist worker starts, so that its imports run
    beside the first tests) and stopped at exit."""

    _instance: Zygote | None = None
    _lock = threading.Lock()

    def __init__(self, repo: Path) -> None:
        self.folder = tempfile.mkdtemp(prefix="jarvis-cli-zygote-")
        self.socket_path = os.path.join(self.folder, "socket")
        env = {**os.environ, "PYTHONPATH": str(repo)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import sys; from tests.cli_forks import serve; sys.exit(serve({self.socket_path!r}))"],
            cwd=str(repo), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        self.ready = False
        atexit.register(self.stop)

    def _wait_ready(self) -> None:
        with self._lock:
            if self.ready:
                return
            assert self.proc.stdout is not None
            if self.proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"the CLI zygote did not start (exit {self.proc.wait()}; its error is above)")
            self.ready = True

    @classmethod
    def shared(cls, repo: Path) -> Zygote:
        with cls._lock:
            if cls._instance is None or cls._instance.proc.poll() is not None:
                cls._instance = cls(repo)
            return cls._instance

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def spawn(self, argv0: str, args: list[str], *, env: dict[str, str], cwd: str, stdin: int, stdout: int,
              stderr: int) -> ForkedCommand:
        """Start `argv0 ARGS` with these file descriptors as its stdin, stdout and stderr (the caller keeps and
        closes its own copies); a Popen-like handle on it."""
        self._wait_ready()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self.socket_path)
        request = {"argv0": argv0, "args": args, "env": env, "cwd": cwd}
        socket.send_fds(conn, [json.dumps(request).encode()], [stdin, stdout, stderr])
        return ForkedCommand([argv0, *args], conn)

    def popen(self, argv0: str, args: list[str], *, env: dict[str, str], cwd: str, stdin: int = subprocess.DEVNULL,
              stdout: int = subprocess.PIPE, stderr: int = subprocess.PIPE, text: bool = False) -> ForkedCommand:
        """As `subprocess.Popen([argv0, *args], ...)` for what the tests use: each stream a file descriptor of the
        caller's (a terminal's side), PIPE or DEVNULL."""
        ours: list[int] = []  # our ends of the pipes, handed to the command's handle
        theirs: list[int] = []  # the command's ends, closed here once it has them

        def end(choice: int, reading: bool) -> int:
            if choice == subprocess.DEVNULL:
                fd = os.open(os.devnull, os.O_RDONLY if reading else os.O_WRONLY)
            elif choice == subprocess.PIPE:
                r, w = os.pipe()
                ours.append(w if reading else r)
                fd = r if reading else w
            else:
                return choice
            theirs.append(fd)
            return fd

        fds = (end(stdin, True), end(stdout, False), end(stderr, False))
        try:
            command = self.spawn(argv0, args, env=env, cwd=cwd, stdin=fds[0], stdout=fds[1], stderr=fds[2])
        finally:
            for fd in theirs:
                os.close(fd)
        pipes = iter(ours)
        mode = "r" if text else "rb"
        command.stdin = open(next(pipes), "w" if text else "wb") if stdin == subprocess.PIPE else None
        command.stdout = open(next(pipes), mode) if stdout == subprocess.PIPE else None
        command.stderr = open(next(pipes), mode) if stderr == subprocess.PIPE else None
        return command

    def run(self, argv0: str, args: list[str], *, env: dict[str, str], cwd: str, input: str | None,
            timeout: float) -> subprocess.CompletedProcess:
        """As `subprocess.run([argv0, *args], input=input, capture_output=True, text=True, timeout=timeout, ...)`."""
        command = self.popen(argv0, args, env=env, cwd=cwd,
                             stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            out, err = command.communicate(None if input is None else input.encode(), timeout)
        except subprocess.TimeoutExpired:
            command.kill()
            raise
        return subprocess.CompletedProcess(command.args, command.returncode, out.decode("utf-8", "replace"),
                                           err.decode("utf-8", "replace"))


class ForkedCommand:
    """A forked command as subprocess.Popen shows one: pid, poll, wait, kill; its exit status comes from its reaper."""

    def __init__(self, args: list[str], conn: socket.socket) -> None:
        self.args = args
        self._conn = conn
        self._received = b""
        self.pid: int = json.loads(self._line(None))["pid"]
        self.returncode: int | None = None
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None

    def _line(self, timeout: float | None) -> bytes:
        """The reaper's next line (b"" if it is gone without one)."""
        self._conn.settimeout(timeout)
        while b"\n" not in self._received:
            chunk = self._conn.recv(4096)
            if not chunk:
                return b""
            self._received += chunk
        line, _, self._received = self._received.partition(b"\n")
        return line

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                line = self._line(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
            self.returncode = json.loads(line)["exit"] if line else -signal.SIGKILL
            self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None and (b"\n" in self._received or select.select([self._conn], [], [], 0)[0]):
            return self.wait()
        return self.returncode

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """`input` written to its stdin pipe (then closed), what is left on its stdout and stderr pipes read to their
        end, all at once, then its exit: as Popen.communicate."""
        import time

        workers = []
        if self.stdin is not None:
            workers.append(threading.Thread(target=_write_and_close, args=(self.stdin, input), daemon=True))
        read: dict[int, Any] = {}
        workers += [threading.Thread(target=lambda i=i, s=stream: read.__setitem__(i, s.read()), daemon=True)
                    for i, stream in enumerate((self.stdout, self.stderr)) if stream is not None]
        for worker in workers:
            worker.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in workers:
            worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return read.get(0), read.get(1)

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _write_and_close(stream: IO[Any], data: Any) -> None:
    try:
        if data:
            stream.write(data)
        stream.close()
    except BrokenPipeError:  # the command did not read it all, as with subprocess.run
        pass
