"""[24] What a task's browser leaves behind for the next task (orchestrator/mcp/browser_pool.py): the logins of the
sites the user approved in that task, nothing else. The browsers themselves run in tests/test_browser_mcp.py."""

from __future__ import annotations

import json
import os

from orchestrator.core.private_file import write_private
from orchestrator.mcp.browser_pool import _read_state, merge_state

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
