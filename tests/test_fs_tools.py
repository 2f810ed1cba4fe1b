"""The file tools stay inside fs.roots: traversal and symlink escapes are refused ([1], [4])."""

from __future__ import annotations

import os

import pytest

from integrations.base import ToolError
from integrations.fs_tools import build_fs_tools


@pytest.fixture
def fs(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.txt").write_text("alpha\nneedle here\n")
    (root / "b.md").write_text("beta")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    os.symlink(outside, root / "escape")
    os.symlink(outside / "secret.txt", root / "secret-link.txt")
    tools = {t.name: t for t in build_fs_tools([root])}
    return root, outside, tools


def test_list_read_write_search_inside_the_root(fs):
    root, _, tools = fs
    names = {e["name"]: e["type"] for e in tools["fs_list_dir"].invoke({"path": str(root)})}
    assert names == {"sub": "dir", "b.md": "file", "escape": "link", "secret-link.txt": "link"}
    assert tools["fs_read_text"].invoke({"path": "sub/a.txt"}).startswith("alpha")
    assert "Wrote 5 bytes" in tools["fs_write_text"].invoke({"path": str(root / "c.txt"), "content": "gamma"})
    assert (root / "c.txt").read_text() == "gamma"
    hits = tools["fs_search"].invoke({"folder": str(root), "content": "NEEDLE"})
    assert hits == [{"path": str(root / "sub" / "a.txt"), "line": "2: needle here"}]
    assert [h["path"] for h in tools["fs_search"].invoke({"folder": str(root), "name_pattern": "*.md"})] == [str(root / "b.md")]


@pytest.mark.parametrize("path", ["../outside/secret.txt", "escape/secret.txt", "secret-link.txt", "/etc/passwd"])
def test_escapes_are_refused(fs, path):
    root, _, tools = fs
    with pytest.raises(ToolError, match="outside the folders Jarvis may use"):
        tools["fs_read_text"].invoke({"path": path})


def test_writes_through_a_symlink_are_refused(fs):
    root, outside, tools = fs
    with pytest.raises(ToolError, match="outside"):
        tools["fs_write_text"].invoke({"path": str(root / "escape" / "new.txt"), "content": "x"})
    with pytest.raises(ToolError, match="outside"):
        tools["fs_write_text"].invoke({"path": str(root / "secret-link.txt"), "content": "x"})
    assert (outside / "secret.txt").read_text() == "top secret" and not (outside / "new.txt").exists()


def test_clear_errors(fs):
    root, _, tools = fs
    with pytest.raises(ToolError, match="does not exist"):
        tools["fs_read_text"].invoke({"path": "missing.txt"})
    with pytest.raises(ToolError, match="is a folder"):
        tools["fs_read_text"].invoke({"path": "sub"})
    (root / "bin.dat").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary file"):
        tools["fs_read_text"].invoke({"path": "bin.dat"})


def test_a_missing_path_says_what_the_nearest_folder_holds(fs):
    """The built-in 135M model, asked to "list the files in my folder", calls fs_list_dir("myfolder.txt") every
    time; the error now names what is there, so the next step (of any model) can put the name right."""
    root, _, tools = fs
    with pytest.raises(ToolError) as err:
        tools["fs_list_dir"].invoke({"path": "myfolder.txt"})
    assert str(err.value) == (f"myfolder.txt does not exist; there are b.md, escape, secret-link.txt, sub/ in {root} "
                              "(use one of these, or that folder itself).")
    with pytest.raises(ToolError) as err:  # several levels missing: the nearest folder that exists
        tools["fs_read_text"].invoke({"path": "sub/deeper/still/x.txt"})
    assert f"there are a.txt in {root / 'sub'} (use" in str(err.value)
    with pytest.raises(ToolError) as err:  # nothing outside the roots is shown, a symlink's target included
        tools["fs_read_text"].invoke({"path": "escape/none.txt"})
    assert "secret.txt" not in str(err.value) and "outside the folders" in str(err.value)
    assert f"there are b.md, escape, secret-link.txt, sub/ in {root} (use" in str(err.value)  # the root's own names


def test_a_path_outside_the_roots_says_what_the_users_folder_holds(fs):
    """At some hours of its prompt's clock line the 135M model, asked to "list the files in my folder", writes
    "/home/user/my-folder.txt": outside every root. The refusal names what the first root holds, as for a missing
    path, and never what is outside."""
    root, outside, tools = fs
    for path in ("/home/user/my-folder.txt", "../outside", "/etc/passwd"):
        with pytest.raises(ToolError) as err:
            tools["fs_list_dir"].invoke({"path": path})
        text = str(err.value)
        assert text.startswith(f"{path} is outside the folders Jarvis may use ({root}); there are b.md, escape, "
                               f"secret-link.txt, sub/ in {root} (use one of these, or that folder itself); add its "
                               "folder to fs.roots"), text
        assert "secret.txt" not in text and "passwd" not in text.split(";", 1)[1]
