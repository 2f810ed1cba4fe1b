"""Install the published servers from PyPI that the tests run (MCP servers, the Matrix homeserver), each into its own virtualenv under
.cache/mcp-venvs (git-ignored): `make test` runs this before the tests.

    python scripts/fetch_pypi_servers.py [DEST]     (DEST defaults to .cache/mcp-venvs in the checkout)

Why a virtualenv each: mcp-server-git's current release is built on the MCP SDK 2.x, while Jarvis and
langchain-mcp-adapters need the 1.x SDK; installed into the project's environment it upgraded the SDK and broke
both. A server is a separate process speaking JSON-RPC over stdio, so its own environment is all it needs (the
protocol versions are negotiated at `initialize`). Pip fetches the pinned packages from the index the machine is
configured with. Prints nothing when they are already there; exits non-zero with what went wrong otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / ".cache" / "mcp-venvs"
# server name -> the pinned requirements of its environment
# sdk-client is not a server: the MCP SDK 2.x whose client the tests drive Jarvis's own MCP server with
# (tests/fakes/mcp_sdk_client.py), a client nobody here wrote, of the SDK generation Jarvis does not use.
# synapse is the Matrix homeserver the Matrix channel's tests run (tests/fakes/synapse.py): a real server in its own
# environment, as its dependencies (Twisted, its own pydantic pins) are no business of Jarvis's.
SERVERS = {"git": ["mcp-server-git==2026.10.19", "mcp==2.3.0"], "sdk-client": ["mcp==2.3.0"],
           "synapse": ["matrix-synapse==1.163.2"]}
STAMP = ".complete"


def installed(env: Path, requirements: list[str]) -> bool:
    try:
        return json.loads((env / STAMP).read_text()) == requirements
    except (OSError, ValueError):
        return False


def install(env: Path, requirements: list[str]) -> str | None:
    """A fresh virtualenv at `env` with `requirements`; None when done, else what went wrong."""
    venv.EnvBuilder(with_pip=True, clear=True).create(env)
    proc = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", *requirements],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return f"pip could not install {' '.join(requirements)} into {env}:\n{proc.stderr[-3000:]}"
    (env / STAMP).write_text(json.dumps(requirements))
    print(f"MCP server from PyPI: {' '.join(requirements)} in {env}")
    return None


def main(argv: list[str]) -> int:
    dest = Path(argv[1]) if len(argv) > 1 else DEFAULT_DEST
    missing = {dest / name: requirements for name, requirements in SERVERS.items()
               if not installed(dest / name, requirements)}
    # Side by side: each is mostly pip waiting on downloads and unpacking (one after another: 61 s here, for three)
    with ThreadPoolExecutor(max_workers=len(SERVERS)) as pool:
        problems = [p for p in pool.map(lambda item: install(*item), missing.items()) if p]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
