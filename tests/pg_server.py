"""A real PostgreSQL server for the storage tests: Debian's package (make test installs it), started in a
temporary folder on a free port for the session. Each test gets a database of its own.

Without PostgreSQL the tests are skipped with the reason printed; JARVIS_REQUIRE_POSTGRES=1 (set by make test
where apt-get can install it) turns that into a failure, so CI cannot skip them silently.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unavailable(reason: str) -> None:
    if os.environ.get("JARVIS_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL storage tests cannot run: {reason} (JARVIS_REQUIRE_POSTGRES=1)")
    pytest.skip(f"PostgreSQL storage tests skipped: {reason}")


class PostgresServer:
    def __init__(self, root: Path):
        self.root = root
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.log = root / "postgres.log"

    def _as_owner(self, argv: list[str]) -> list[str]:
        # PostgreSQL refuses to run as root: run it as the package's `postgres` user.
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *argv]
        return argv

    def start(self) -> None:
        initdb, postgres = _bin("initdb"), _bin("postgres")
        if not initdb or not postgres:
            _unavailable("initdb/postgres not found (apt-get install postgresql)")
        data = self.root / "data"
        data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(data, "postgres")
            self.log.touch()
            shutil.chown(self.log, "postgres")
        out = subprocess.run(self._as_owner([initdb, "-D", str(data), "-A", "trust", "-U", "jarvis", "-E", "UTF8",
                                             "--no-sync"]), capture_output=True, text=True)
        if out.returncode != 0:
            _unavailable(f"initdb failed: {out.stderr.strip()[-400:]}")
        self.proc = subprocess.Popen(
            self._as_owner([postgres, "-D", str(data), "-p", str(self.port), "-h", "127.0.0.1", "-k", str(self.root),
                            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=300"]),
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    _unavailable(f"the server did not start: {self.log.read_text()[-400:]}")
                time.sleep(0.2)

    def url(self, database: str) -> str:
        return f"postgresql://jarvis@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def postgres_session() -> Iterator[PostgresServer]:
    root = Path(tempfile.mkdtemp(prefix="jarvis-pg-"))
    os.chmod(root, 0o755)
    server = PostgresServer(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
