"""Runs inside the sandbox: call one generated tool with JSON arguments, answer with one JSON line.

    python -I -B tool_runner.py NAME  < {"arguments"}   ->   {"ok": true, "result": ...}
                                                          or {"ok": false, "error": "...", "traceback": "..."}

The module NAME.py is in the working directory. Anything the tool prints goes to stderr, so stdout carries
only the answer. Standard library only: it runs with the sandbox's read-only interpreter.
"""

import datetime
import decimal
import json
import os
import sys
import traceback


def _jsonable(value):
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"the tool returned a {type(value).__name__}, which is not JSON")


def main() -> None:
    name = sys.argv[1]
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the tool's own prints must not corrupt the answer
    try:
        arguments = json.loads(sys.stdin.read() or "{}")
        sys.path.insert(0, os.getcwd())
        module = __import__(name)
        result = getattr(module, name)(**arguments)
        text = json.dumps({"ok": True, "result": result}, default=_jsonable, ensure_ascii=False)
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the parent
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                           "traceback": "".join(tb)[-4000:]})
    answer.write(text + "\n")
    answer.flush()


if __name__ == "__main__":
    main()
