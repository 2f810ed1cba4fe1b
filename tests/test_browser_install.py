"""[24] What a new user gets for the browser Jarvis drives (mcp/playwright.toml, on by default): `make run` installs
Chromium and npm and fetches the pinned package; where either is missing, the server is "unavailable" with a reason
that names the fix; the package's pin is written once (the TOML) and every other place agrees with it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from orchestrator.mcp import config as mcp_config
from orchestrator.mcp.config import load_server_file
from tests.conftest import REPO

BROWSER = REPO / "mcp" / "playwright.toml"


def fetch_script():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import fetch_npm_servers
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return fetch_npm_servers


def make_recipe(target: str) -> str:
    """The lines of a Makefile target's recipe, continuation lines joined."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(rf"^{target}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
    assert found, f"no target {target} in the Makefile"
    return found.group(1)


def test_the_browser_is_on_by_default_so_make_run_installs_what_it_needs():
    cfg = load_server_file(BROWSER)
    assert cfg.enabled and cfg.command == "npx" and "/usr/bin/chromium" in cfg.requires
    recipe = make_recipe("run")
    deps = next(line for line in recipe.splitlines() if "install-system-deps.sh" in line).split()
    assert {"chromium", "npm"} <= set(deps), deps
    assert "scripts/fetch_npm_servers.py --npx" in recipe  # the pinned package fetched before the first step
    # and the README says so where it lists what `make run` installs
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`make run` also installs Chromium and npm" in readme


@pytest.mark.parametrize("missing", ["/usr/bin/chromium", "npx"])
def test_a_missing_chromium_or_npx_is_reported_with_the_fix(monkeypatch, missing):
    cfg = load_server_file(BROWSER)
    monkeypatch.setattr(mcp_config, "program_exists", lambda program: program != missing)
    why = cfg.availability()
    assert why is not None and why.startswith(f"{missing} is not installed")
    assert "make install-system" in why
    # a Chromium elsewhere (Ubuntu's chromium-browser, a snap): the message says where to name it
    assert "--executable-path" in why and "mcp/playwright.toml" in why
    if missing.startswith("/"):
        assert "not found on PATH" not in why  # it is a path, not a program looked up on PATH


def test_the_browser_package_is_pinned_once():
    spec = fetch_script().browser_spec()
    version = spec.rsplit("@", 1)[1]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), spec  # an exact version, never a range or a tag
    assert fetch_script().PACKAGES["@playwright/mcp"] == version  # what the tests install is what Jarvis runs
    readme = (REPO / "README.md").read_text()
    assert set(re.findall(r"@playwright/mcp@[\w.\-]+", readme)) == {spec}


def test_npx_missing_makes_the_prefetch_say_how_to_install_it(tmp_path):
    # PATH with python only: no npx
    (tmp_path / "python").symlink_to(sys.executable)
    proc = subprocess.run([str(tmp_path / "python"), str(REPO / "scripts" / "fetch_npm_servers.py"), "--npx"],
                          env={"PATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "make install-system" in proc.stderr, proc.stderr
