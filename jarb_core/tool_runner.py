"""Runs inside the sandbox: call one generated tool with JSON arguments, answer with one JSON line.

    python -I -S -B tool_runner.py NAME [SITE_DIR...]  < {"arguments"}
        ->  {"ok": true, "result": ...}  or  {"ok": false, "error": "...", "traceback": "..."}

The module NAME.py is in the working directory. The interpreter starts without `site` (-S: no .pth files to
run, which halves the start-up time); the site-packages folders given after NAME are put on sys.path instead, so
a tool can still import the packages Jarvis has (requests, ...). Anything the tool prints goes to stderr, so stdout carries
only the answer. Standard library only: it runs with the sandbox's read-only interpreter.
"""

import json
import os
import sys


def _jsonable(value):
    # datetime and decimal are only looked at when a result needs them (every import costs start-up time)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    module = type(value).__module__
    if module == "datetime" and hasattr(value, "isoformat"):
        return value.isoformat()
    if module == "decimal":
        return float(value)
    raise TypeError(f"the tool returned a {type(value).__name__}, which is not JSON")


def main() -> None:
    name = sys.argv[1]
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the tool's own prints must not corrupt the answer
    try:
        arguments = json.loads(sys.stdin.read() or "{}")
        sys.path.insert(0, os.getcwd())
        sys.path.extend(sys.argv[2:])
        module = __import__(name)
        result = getattr(module, name)(**arguments)
        text = json.dumps({"ok": True, "result": result}, default=_jsonable, ensure_ascii=False)
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the parent
        import traceback

        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                           "traceback": "".join(tb)[-4000:]})
    answer.write(text + "\n")
    answer.flush()


if __name__ == "__main__":
    main()
