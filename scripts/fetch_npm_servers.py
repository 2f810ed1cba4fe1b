"""Install the published MCP servers the tests run (from npm, pinned) into .cache/npm (git-ignored): `make test`
runs this before the tests.

    python scripts/fetch_npm_servers.py [DEST]     (DEST defaults to .cache/npm in the checkout)

Nothing of it is committed: npm fetches the pinned packages from the registry the machine is configured with (no
lockfile is written, so no registry address ends up in the repository). Prints nothing when they are already
there; exits non-zero with what went wrong otherwise (npm missing: `make install-system` installs it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / ".cache" / "npm"
# The reference servers of the Model Context Protocol project and Playwright MCP, pinned.
PACKAGES = {"@modelcontextprotocol/server-filesystem": "2026.8.31", "@modelcontextprotocol/server-memory": "2026.8.31",
            # the browser of mcp/playwright.toml (it drives the system Chromium: --ignore-scripts fetches no browser)
            "@playwright/mcp": "0.0.83"}
STAMP = ".complete"


def installed(dest: Path) -> bool:
    try:
        return json.loads((dest / STAMP).read_text()) == PACKAGES
    except (OSError, ValueError):
        return False


def main(argv: list[str]) -> int:
    dest = Path(argv[1]) if len(argv) > 1 else DEFAULT_DEST
    if installed(dest):
        return 0
    npm = shutil.which("npm")
    if npm is None:
        print("npm is not installed: run `make install-system` (or install Node.js and npm)", file=sys.stderr)
        return 1
    dest.mkdir(parents=True, exist_ok=True)
    specs = [f"{name}@{version}" for name, version in PACKAGES.items()]
    proc = subprocess.run([npm, "install", "--prefix", str(dest), "--no-package-lock", "--no-save", "--no-audit",
                           "--no-fund", "--ignore-scripts", *specs], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"npm could not install {' '.join(specs)}:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return 1
    (dest / STAMP).write_text(json.dumps(PACKAGES))
    print(f"MCP servers from npm: {', '.join(specs)} in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
