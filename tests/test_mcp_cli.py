"""`jarvis mcp import | status | tools` through the real `jarvis` binary."""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from orchestrator.mcp.config import import_mcp_servers, load_server_file, load_servers
from tests.conftest import REPO
from tests.mcp_helpers import shutdown_mcp

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True)
def _stop_servers():
    yield
    shutdown_mcp()


def test_import_a_claude_desktop_file(jarvis_env):
    proc = jarvis_env.cli("mcp", "import", str(DATA / "claude_desktop_config.json"))
    assert proc.returncode == 0, proc.stderr
    mcp_dir = jarvis_env.path / "mcp"
    assert sorted(p.name for p in mcp_dir.glob("*.toml")) == ["fetch.toml", "filesystem.toml", "github.toml",
                                                               "macuse.toml", "remote-docs.toml"]
    assert "skipped broken: it has neither 'command'" in proc.stderr
    fs = load_server_file(mcp_dir / "filesystem.toml")
    assert fs.command == "npx" and fs.args[-1] == "/Users/me/Downloads" and fs.side_effects == ["ui_automation"]
    github = tomllib.loads((mcp_dir / "github.toml").read_text())
    # the token went to the keyring; the file holds a reference, never the value
    assert github["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": {"secret": "mcp_github_github_personal_access_token"}}
    assert "ghp_example0token" not in (mcp_dir / "github.toml").read_text()
    assert "moved to the keyring" in proc.stdout
    remote = load_server_file(mcp_dir / "remote-docs.toml")
    assert remote.transport == "streamable_http" and remote.url == "https://docs.example.invalid/mcp"
    fetch = load_server_file(mcp_dir / "fetch.toml")
    assert fetch.enabled is False and fetch.timeout_s == 60
    assert "ignored keys autoApprove" in proc.stdout
    # a second import does not overwrite
    again = import_mcp_servers(DATA / "claude_desktop_config.json", mcp_dir, store_secrets=False)
    assert not again.written and any("exists (use --overwrite" in s for s in again.skipped)

    status = jarvis_env.cli_json("mcp", "status", "--json", "--no-start")
    states = {s["name"]: s for s in status}
    assert states["fetch"]["state"] == "disabled" and "enabled = false" in states["fetch"]["last_error"]
    assert states["macuse"]["state"] == "unavailable"
    assert set(states) == {"fetch", "filesystem", "github", "macuse", "remote-docs"}


def test_import_refuses_bad_files(jarvis_env, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"x": {"command": "a",}}}')
    proc = jarvis_env.cli("mcp", "import", str(bad))
    assert proc.returncode == 1 and "not valid JSON (line 1" in proc.stderr
    other = tmp_path / "other.json"
    other.write_text('{"servers_list": []}')
    with pytest.raises(ValueError, match="no 'mcpServers' object found"):
        import_mcp_servers(other, tmp_path / "mcp")


def test_tools_and_status_of_a_running_server(jarvis_env):
    mcp_dir = jarvis_env.path / "mcp"
    mcp_dir.mkdir()
    (mcp_dir / "time.toml").write_text(
        f'command = "{Path(sys.executable).parent / "mcp-server-time"}"\nargs = ["--local-timezone", "UTC"]\n')
    (mcp_dir / "bad.toml").write_text("transport = 'sse'\n")
    tools = jarvis_env.cli_json("mcp", "tools", "--json")
    by_name = {t["mcp_name"]: t for t in tools}
    assert set(by_name) == {"get_current_time", "convert_time"}
    assert by_name["get_current_time"]["server"] == "time"
    assert by_name["get_current_time"]["exposed_name"] == "get_current_time"
    assert isinstance(by_name["convert_time"]["side_effects"], list)
    status = {s["name"]: s for s in jarvis_env.cli_json("mcp", "status", "--json")}
    assert status["time"]["state"] == "ready" and status["time"]["tools"] == 2 and status["time"]["last_error"] is None
    assert status["bad"]["state"] == "broken" and "needs 'url'" in status["bad"]["last_error"]


def test_shipped_definitions_load_and_say_why_they_cannot_run(jarvis_env):
    loaded = load_servers(REPO / "mcp")
    assert not loaded.errors and set(loaded.servers) == {"adb", "browser-use", "macuse", "playwright"}
    playwright = loaded.servers["playwright"]
    assert "@playwright/mcp@0.0.83" in playwright.args and "--headless" in playwright.args  # pinned, no window
    assert playwright.browser is not None and playwright.side_effects == ["ui_automation"]
    assert not playwright.tools["browser_run_code_unsafe"].enabled  # code in Node.js on this machine
    assert playwright.browser.unknown_target == ["browser_navigate_back"]
    adb = loaded.servers["adb"]
    assert adb.side_effects == ["phone_automation"] and adb.android is not None
    assert "@mobilenext/mobile-mcp@1.0.4" in adb.args  # pinned
    assert loaded.servers["browser-use"].enabled is False
    macuse = loaded.servers["macuse"]
    assert set(macuse.wrappers) == {"apple_mail_list_threads", "apple_mail_draft_reply", "apple_mail_send",
                                    "apple_calendar_create_event", "apple_notes_create_note"}
    jarvis_env.write_config(mcp={"dir": str(REPO / "mcp")})
    status = {s["name"]: s for s in jarvis_env.cli_json("mcp", "status", "--json", "--no-start")}
    if sys.platform != "darwin":
        assert status["macuse"]["state"] == "unavailable"
        assert "macOS only (this machine is Linux)" in status["macuse"]["last_error"]
    assert status["browser-use"]["state"] == "disabled"
    if not (shutil.which("adb") and shutil.which("npx")):
        assert status["adb"]["state"] == "unavailable" and "is not installed" in status["adb"]["last_error"]
