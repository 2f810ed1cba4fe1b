"""Set resource limits, then exec a command: `python -I -S _limits_exec.py LIMITS_JSON -- COMMAND ...`.

Used where `prlimit` (util-linux) is missing, e.g. macOS. Standard library only; it runs before the
sandboxed command and is replaced by it (exec), so it costs one interpreter start.
"""

import json
import os
import resource
import sys

_NAMES = {
    "cpu": "RLIMIT_CPU",
    "as": "RLIMIT_AS",
    "fsize": "RLIMIT_FSIZE",
    "nofile": "RLIMIT_NOFILE",
    "nproc": "RLIMIT_NPROC",
    "core": "RLIMIT_CORE",
}


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.stderr.write("usage: _limits_exec.py LIMITS_JSON -- COMMAND [ARGS...]\n")
        sys.exit(2)
    limits = json.loads(sys.argv[1])
    for key, value in limits.items():
        name = _NAMES.get(key)
        if name is None or not hasattr(resource, name):
            continue
        try:
            soft, hard = value if isinstance(value, list) else (value, value)
            resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))
        except (ValueError, OSError) as exc:
            sys.stderr.write(f"jarvis-sandbox: could not set {name} to {value}: {exc}\n")
    command = sys.argv[3:]
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
