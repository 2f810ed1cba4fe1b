"""[24] What a task's browser leaves behind for the next task (orchestrator/mcp/browser_pool.py): the logins of the
sites the user approved in that task, nothing else; and how its memory is bounded (a cgroup where one can be made,
said where not). The browsers themselves run in tests/test_browser_mcp.py."""

from __future__ import annotations

import json
import logging
import os
import subprocess

import pytest

from orchestrator.core import cgroups
from orchestrator.core.cgroups import CgroupLimits, RunCgroup
from orchestrator.core.private_file import write_private
from orchestrator.mcp.browser_pool import _read_state, merge_state
from tests.conftest import REPO
from tests.mcp_helpers import install_playwright

X, Y = "http://127.0.0.1:8080", "https://y.example"


def cookie(name: str, domain: str, value: str = "v") -> dict:
    return {"name": name, "value": value, "domain": domain, "path": "/", "expires": -1, "httpOnly": True,
            "secure": False, "sameSite": "Lax"}


def test_only_the_approved_sites_are_kept():
    fresh = {"cookies": [cookie("session", "127.0.0.1"), cookie("tracker", ".y.example"), cookie("ad", "ads.example")],
             "origins": [{"origin": X, "localStorage": [{"name": "k", "value": "x"}]},
                         {"origin": Y, "localStorage": [{"name": "k", "value": "planted"}]}]}
    merged = merge_state({"cookies": [], "origins": []}, fresh, {X})
    assert [c["name"] for c in merged["cookies"]] == ["session"]
    assert [o["origin"] for o in merged["origins"]] == [X]


def test_a_new_login_replaces_the_old_one_and_other_sites_stay():
    kept = {"cookies": [cookie("session", "127.0.0.1", "old"), cookie("old-only", "127.0.0.1"),
                        cookie("session", ".y.example", "y")],
            "origins": [{"origin": Y, "localStorage": [{"name": "k", "value": "y"}]}]}
    fresh = {"cookies": [cookie("session", "127.0.0.1", "new")], "origins": []}
    merged = merge_state(kept, fresh, {X})
    assert sorted((c["domain"], c["name"], c["value"]) for c in merged["cookies"]) == [
        (".y.example", "session", "y"), ("127.0.0.1", "session", "new")]
    assert merged["origins"] == kept["origins"]


def test_a_browser_that_came_back_empty_logs_nobody_out():
    kept = {"cookies": [cookie("session", "127.0.0.1", "old")], "origins": [{"origin": X, "localStorage": []}]}
    assert merge_state(kept, {"cookies": [], "origins": []}, {X}) == kept


def test_a_cookie_for_a_parent_domain_belongs_to_its_subdomains_only():
    fresh = {"cookies": [cookie("s", ".example.org"), cookie("t", "evil-example.org"), cookie("u", "org")]}
    merged = merge_state({}, fresh, {"https://app.example.org"})
    assert [c["name"] for c in merged["cookies"]] == ["s"]


def test_a_state_file_that_is_not_one_counts_as_empty(tmp_path):
    for content in (b"[1, 2]", b"not json", b"\xff\xfe", b"{" + b" " * (17 * 2**20) + b"}"):
        (tmp_path / "s.json").write_bytes(content)
        assert _read_state(tmp_path / "s.json") == {"cookies": [], "origins": []}
    assert _read_state(tmp_path / "missing.json") == {"cookies": [], "origins": []}


def test_the_state_file_is_private_and_replaces_a_planted_symlink(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("the user's file")
    os.symlink(target, tmp_path / "state.json")
    write_private(tmp_path / "state.json", json.dumps({"cookies": [cookie("s", "x")]}))
    assert target.read_text() == "the user's file"  # not written through the link
    assert not (tmp_path / "state.json").is_symlink()
    assert (tmp_path / "state.json").stat().st_mode & 0o777 == 0o600
    assert json.loads((tmp_path / "state.json").read_text())["cookies"][0]["name"] == "s"


def _memory_cgroup_or_skip() -> None:
    why = cgroups.missing().get("memory")
    if why is not None:
        if os.environ.get("JARVIS_REQUIRE_CGROUPS") == "1":
            pytest.fail(f"no memory cgroup can be made here: {why} (JARVIS_REQUIRE_CGROUPS=1)")
        pytest.skip(f"no memory cgroup can be made here: {why}")


def test_a_browser_cgroup_bounds_memory_only_and_its_process_is_in_it_from_the_start():
    _memory_cgroup_or_skip()
    cgroup = RunCgroup.create(CgroupLimits(memory_bytes=256 * 2**20), kind="browser")
    assert cgroup is not None and set(cgroup.dirs) == {"memory"}  # no pids or cpu cap on a browser
    (path, _version), = cgroup.dirs.values()
    try:
        assert path.name.startswith(f"jarvis-browser-{os.getpid()}-")
        # the wrapped command's own first read of /proc/self/cgroup already shows it inside
        seen = subprocess.run(cgroup.wrap(["cat", "/proc/self/cgroup"]), capture_output=True, text=True, check=True)
        assert any(line.endswith("/" + path.name) and "memory" in line.split(":")[1].split(",") or
                   line.startswith("0::") and line.endswith("/" + path.name) for line in seen.stdout.splitlines()), \
            seen.stdout
    finally:
        cgroup.remove()
    assert not path.exists()


def test_a_browser_cgroup_left_by_a_dead_jarvis_is_swept(tmp_path):
    _memory_cgroup_or_skip()
    parent, version = cgroups.parents()["memory"]  # type: ignore[misc]
    dead = subprocess.Popen(["sleep", "60"])
    made_by = cgroups.identity(dead.pid)
    dead.kill()
    dead.wait()
    left = parent / f"jarvis-browser-{dead.pid}-{made_by}-0badc0de"
    left.mkdir()
    ours = RunCgroup.create(CgroupLimits(memory_bytes=64 * 2**20), kind="browser")
    try:
        cgroups._sweep_stale(parent, version)
        assert not left.exists() and ours is not None and all(d.exists() for d, _ in ours.dirs.values())
    finally:
        if left.exists():
            left.rmdir()
        if ours is not None:
            ours.remove()


def _browser_config(jarvis_env):
    install_playwright(jarvis_env.path / "mcp", REPO / "cli.js")  # never started here
    app = jarvis_env.app()
    return app.mcp_manager, app.mcp_manager.configs()["playwright"]


def test_where_no_memory_cgroup_can_be_made_the_browsers_keep_soft_bounds_and_say_so_once(jarvis_env, monkeypatch,
                                                                                           caplog):
    manager, cfg = _browser_config(jarvis_env)
    assert cfg.browser.memory_mb == 1536  # the shipped bound
    why = "the memory controller is not available to this process (not delegated)"
    monkeypatch.setattr(cgroups, "_parents", {c: why for c in cgroups.CONTROLLERS})
    with caplog.at_level(logging.WARNING, logger="orchestrator.mcp.browser_pool"):
        assert manager.browsers._memory_cgroup(cfg) is None
        assert manager.browsers._memory_cgroup(cfg) is None
    said = [r.getMessage() for r in caplog.records if "soft memory bounds only" in r.getMessage()]
    assert len(said) == 1 and why in said[0] and "V8 heap" in said[0], said
    (row,) = [r for r in manager.status() if r.name == "playwright"]
    assert row.note is not None and "soft memory bounds only" in row.note and why in row.note


def test_mcp_status_says_how_each_tasks_browser_is_bounded(jarvis_env):
    manager, cfg = _browser_config(jarvis_env)
    expected = manager.browsers.memory_note(cfg)
    if "memory" not in cgroups.missing():
        assert expected == "each task's browser is bounded to 1536 MB (a memory cgroup)"
    proc = jarvis_env.cli("mcp", "status", "--no-start", check=True)
    assert expected in proc.stdout, proc.stdout
