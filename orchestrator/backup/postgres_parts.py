"""The PostgreSQL database of `storage.url`, dumped with pg_dump (one consistent snapshot of every table while
Jarvis runs) and restored with pg_restore. The password goes to the tools through PGPASSWORD, never on a command
line another user could read in the process list.
"""

from __future__ import annotations

import glob
import shutil
import subprocess
from pathlib import Path

from sqlalchemy.engine import make_url

from orchestrator.core.child_env import child_environment
from orchestrator.storage.pg import libpq_url

from .manifest import BackupRefused


def _tool(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)),
                                       None)
    if not found:
        raise BackupRefused(f"{name} is not installed: it is needed to back up or restore a PostgreSQL database "
                            "(install PostgreSQL's client tools)")
    return found


def _target(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its password, and the variable that carries it to the program."""
    parsed = make_url(libpq_url(url))
    password = {"PGPASSWORD": parsed.password} if parsed.password else {}
    return parsed.set(password=None).render_as_string(hide_password=False), password


def _run(argv: list[str], password: dict[str, str], what: str) -> None:
    # pg_dump and pg_restore get Jarvis's environment without its secrets, and the database's password
    env = child_environment(password)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise BackupRefused(f"{what} failed: {out.stderr.strip()[-600:]}")


def dump(url: str, dest: Path) -> dict:
    """pg_dump of the database into `dest`; returns its row counts and schema versions, read in the very snapshot
    pg_dump copies (an exported snapshot held open by this connection), so a restore can check them exactly."""
    import psycopg

    target, env = _target(url)
    with psycopg.connect(libpq_url(url), connect_timeout=15) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        snapshot = conn.execute("SELECT pg_export_snapshot()").fetchone()[0]
        described = _describe(conn)
        _run([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--snapshot={snapshot}",
              f"--file={dest}", target], env, "pg_dump")
        conn.rollback()
    return described


def restore(url: str, source: Path, *, clean: bool) -> None:
    target, env = _target(url)
    argv = [_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction"]
    if clean:
        argv += ["--clean", "--if-exists"]
    _run([*argv, f"--dbname={target}", str(source)], env, "pg_restore")


def _tables(conn) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename")]


def _describe(conn) -> dict:
    from psycopg import sql

    tables = _tables(conn)
    counts = {t: conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))).fetchone()[0]
              for t in tables}
    versions = {}
    if "schema_versions" in tables:
        versions = {r[0]: int(r[1]) for r in conn.execute("SELECT table_name, version FROM schema_versions")}
    return {"tables": counts, "schema_versions": versions}


def describe(url: str) -> dict:
    """Row counts per table and the schema versions, as `sqlite_parts.describe` gives them."""
    import psycopg

    with psycopg.connect(libpq_url(url), connect_timeout=15) as conn:
        return _describe(conn)


def has_tables(url: str) -> bool:
    import psycopg

    with psycopg.connect(libpq_url(url), connect_timeout=15) as conn:
        return bool(_tables(conn))


def check_dump(path: Path) -> None:
    """pg_restore reads the dump's table of contents: the file is a whole custom-format dump."""
    _run([_tool("pg_restore"), "--list", str(path)], {}, "reading the PostgreSQL dump")
