"""Core statements compiled once per dialect and run on the driver's cursor: the writes made after every turn (the
thread's status, storage/threads.py; the turn's run and its events, storage/telemetry.py).

`conn.execute(statement, params)` builds the statement's cache key again on every call to find its compiled form,
then makes an execution context and a result object: about 80 µs a statement here, more than SQLite takes to run
it, and three such statements ran after every turn (bench/turn_overhead.py). A Prepared statement keeps, per
dialect, its compiled text, the order of its parameters and each parameter's bind processor (a datetime becomes
SQLite's text, a StatusText refuses an unknown status: the conversions `execute` makes), and runs it with
`exec_driver_sql` in the caller's transaction, so SQLAlchemy's transaction, error wrapping and events stay.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection


@dataclass(frozen=True)
class _Compiled:
    sql: str
    positional: bool
    names: tuple[str, ...]  # the parameters in the order the driver takes them (a name may come twice)
    processors: dict[str, Callable[[Any], Any]]
    fixed: dict[str, Any]  # values written into the statement itself (a literal compared with, a default)


class Prepared:
    """A Core statement (insert, upsert) whose parameters are given by name, as to `conn.execute`; `keys` are the
    columns an insert is given (the others take their server default)."""

    def __init__(self, statement: Any, keys: Sequence[str] | None = None):
        self.statement = statement
        self.keys = list(keys) if keys is not None else None
        self._by_dialect: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def _compiled(self, dialect: Any) -> _Compiled:
        found = self._by_dialect.get(dialect.name)
        if found is not None:
            return found
        compiled = self.statement.compile(dialect=dialect, column_keys=self.keys)
        if compiled.insert_prefetch or compiled.update_prefetch:  # computed by execute's context, which this skips
            raise ValueError("a Prepared statement is given every column that has a Python-side default: "
                             + ", ".join(c.name for c in [*compiled.insert_prefetch, *compiled.update_prefetch]))
        processors = {}
        for name, bind in compiled.binds.items():
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                processors[name] = processor
        fixed = {name: bind.effective_value for name, bind in compiled.binds.items() if not bind.required}
        names = tuple(compiled.positiontup or ()) if compiled.positional else tuple(compiled.binds)
        found = _Compiled(compiled.string, compiled.positional, names, processors, fixed)
        with self._lock:
            self._by_dialect[dialect.name] = found
        return found

    def _row(self, compiled: _Compiled, params: dict[str, Any]) -> tuple | dict:
        values = {**compiled.fixed, **params}
        for name, process in compiled.processors.items():
            if name in values:
                values[name] = process(values[name])
        if compiled.positional:
            return tuple(values[name] for name in compiled.names)
        return {name: values[name] for name in compiled.names}

    def run(self, conn: Connection, params: dict[str, Any] | list[dict[str, Any]]) -> None:
        """One row (a dict) or many (a list of dicts, one executemany)."""
        compiled = self._compiled(conn.dialect)
        if isinstance(params, list):
            if params:
                conn.exec_driver_sql(compiled.sql, [self._row(compiled, p) for p in params])
            return
        conn.exec_driver_sql(compiled.sql, self._row(compiled, params))
