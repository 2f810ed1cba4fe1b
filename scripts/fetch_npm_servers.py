"""Install the published MCP servers the tests run, and the MCP Inspector (from npm, pinned) into .cache/npm (git-ignored): `make test`
runs this before the tests. `--npx` instead puts the browser Jarvis itself runs (mcp/playwright.toml, started with
`npx -y`) into npx's own cache, so its first start needs no download: `make run` does that.

    python scripts/fetch_npm_servers.py [DEST]     (DEST defaults to .cache/npm in the checkout)
    python scripts/fetch_npm_servers.py --npx

Nothing of it is committed: npm fetches the pinned packages from the registry the machine is configured with (no
lockfile is written, so no registry address ends up in the repository). Prints nothing when they are already
there; exits non-zero with what went wrong otherwise (npm missing: `make install-system` installs it).

The browser's pin is written once, in mcp/playwright.toml (what Jarvis runs); this script reads it from there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO / ".cache" / "npm"
BROWSER_TOML = REPO / "mcp" / "playwright.toml"
BROWSER_PACKAGE = "@playwright/mcp"
STAMP = ".complete"


def browser_spec(toml: Path = BROWSER_TOML) -> str:
    """`@playwright/mcp@<version>`: the package argument of the browser server's `npx -y` command."""
    args = tomllib.loads(toml.read_text(encoding="utf-8"))["args"]
    found = [a for a in args if a.startswith(BROWSER_PACKAGE + "@")]
    if len(found) != 1 or not found[0][len(BROWSER_PACKAGE) + 1:]:
        raise SystemExit(f"{toml}: no pinned {BROWSER_PACKAGE}@<version> among its args")
    return found[0]


# The reference servers of the Model Context Protocol project and Playwright MCP, pinned; the browser (it drives the
# system Chromium: --ignore-scripts fetches no browser) at the version mcp/playwright.toml runs.
# The MCP Inspector is a client: its command-line mode drives Jarvis's own MCP server in the tests.
PACKAGES = {"@modelcontextprotocol/server-filesystem": "2026.8.31", "@modelcontextprotocol/server-memory": "2026.8.31",
            BROWSER_PACKAGE: browser_spec().rsplit("@", 1)[1], "@modelcontextprotocol/inspector": "2.12.0"}


def installed(dest: Path) -> bool:
    try:
        return json.loads((dest / STAMP).read_text()) == PACKAGES
    except (OSError, ValueError):
        return False


def prefetch_for_npx() -> int:
    """npx keeps what `npx -y <spec>` fetched in its cache: running the pinned browser server once (`--version`
    prints its version and exits) fetches it now rather than at Jarvis's first browser step."""
    spec = browser_spec()
    npx = shutil.which("npx")
    if npx is None:
        print("npx is not installed (Node.js and npm): run `make install-system`, or install Node.js 18+ and npm",
              file=sys.stderr)
        return 1
    try:
        proc = subprocess.run([npx, "-y", spec, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=600)
    except subprocess.TimeoutExpired:
        print(f"npx did not fetch {spec} within 10 minutes", file=sys.stderr)
        return 1
    if proc.returncode != 0:
        print(f"npx could not fetch {spec}:\n{(proc.stderr or proc.stdout)[-3000:]}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--npx"]:
        return prefetch_for_npx()
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
