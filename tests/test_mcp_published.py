"""[17]: published MCP servers nobody here wrote, pinned: the Model Context Protocol project's filesystem and memory
servers from npm (`make test` installs them into .cache/npm with scripts/fetch_npm_servers.py) and its git server
from PyPI (in its own virtualenv under .cache/mcp-venvs, scripts/fetch_pypi_servers.py: it is built on the 2.x SDK
that Jarvis's own environment cannot hold), imported from a Claude-Desktop style file with `jarvis mcp import`,
driven through the planner (read and write tools, writes behind a confirmation), one killed mid-session and
restarted, one added while Jarvis runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from langgraph.types import Command

from tests.conftest import REPO, answer, tool_call
from tests.mcp_helpers import pids_with_arg, shutdown_mcp, wait_for

NPM = Path(os.environ.get("JARVIS_TEST_NPM") or REPO / ".cache" / "npm") / "node_modules" / "@modelcontextprotocol"
FILESYSTEM = NPM / "server-filesystem" / "dist" / "index.js"
MEMORY = NPM / "server-memory" / "dist" / "index.js"
MCP_VENVS = Path(os.environ.get("JARVIS_TEST_MCP_VENVS") or REPO / ".cache" / "mcp-venvs")
GIT_SERVER = MCP_VENVS / "git" / "bin" / "mcp-server-git"


@pytest.fixture(autouse=True)
def _published_servers():
    if not (FILESYSTEM.is_file() and MEMORY.is_file() and GIT_SERVER.is_file()):
        raise pytest.UsageError(f"the published MCP servers are not in {NPM.parent.parent} and {GIT_SERVER}: run "
                                "`make test-corpus` (or `make test`, which installs them)")
    yield
    shutdown_mcp()


def _claude_file(tmp_path: Path, root: Path, *, memory: bool = True) -> Path:
    servers = {"filesystem": {"command": "node", "args": [str(FILESYSTEM), str(root)]}}
    if memory:
        servers["memory"] = {"command": "node", "args": [str(MEMORY)],
                             "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}}
    path = tmp_path / f"claude_desktop_config{'' if memory else '_fs'}.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def _server_pid(script: Path) -> int:
    """The process running `script` (the server's own process, not npm's) that this test started."""
    pids = pids_with_arg(str(script), under=os.getpid())
    assert pids, f"no process of this test runs {script}"
    return pids[0]


def _approve(graph, config, result):
    (intr,) = result.interrupts
    return intr, graph.invoke(Command(resume={intr.id: {"decision": "approve"}}), config, version="v2")


def test_filesystem_and_memory_servers_through_the_planner(jarvis_env, tmp_path):
    # a restart waits long enough for a call to be made while the server is down
    jarvis_env.write_config(mcp={"restart_backoff_s": 12, "max_restart_backoff_s": 12})
    root = jarvis_env.root
    proc = jarvis_env.cli("mcp", "import", str(_claude_file(tmp_path, root)))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (jarvis_env.path / "mcp").glob("*.toml")) == ["filesystem.toml", "memory.toml"]
    server = jarvis_env.server
    app = jarvis_env.app()
    graph = app.graph
    config = {"configurable": {"thread_id": "npm-1"}}

    # a write asks first (an MCP tool with side effects: ui_automation by default), then lands in the root
    target = root / "hello.txt"
    server.push(tool_call("write_file", path=str(target), content="hi from MCP"), answer("Written."))
    result = graph.invoke({"messages": [("user", "write hi to hello.txt")]}, config, version="v2")
    intr, result = _approve(graph, config, result)
    assert intr.value["tool"] == "write_file" and intr.value["side_effects"] == ["ui_automation"]
    assert target.read_text() == "hi from MCP" and result.value["messages"][-1].content == "Written."

    # a read runs at once, and its text comes back as untrusted content
    server.push(tool_call("read_text_file", path=str(target)), answer("It says hi."))
    result = graph.invoke({"messages": [("user", "read it")]}, config, version="v2")
    read = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert read.status == "success" and "hi from MCP" in read.content
    # outside the server's allowed folder: the server's own refusal reaches the model as an error
    server.push(tool_call("read_text_file", path="/etc/hostname"), answer("Not allowed."))
    result = graph.invoke({"messages": [("user", "read /etc/hostname")]}, {"configurable": {"thread_id": "npm-2"}},
                          version="v2")
    refused = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert refused.status == "error" and "outside allowed directories" in refused.content.lower()

    # the memory server: create an entity (asks first), then find it
    config = {"configurable": {"thread_id": "npm-3"}}
    server.push(tool_call("create_entities", entities=[{"name": "Ana", "entityType": "person",
                                                        "observations": ["dentist on Tuesdays"]}]),
                answer("Remembered."))
    _, result = _approve(graph, config, graph.invoke({"messages": [("user", "remember Ana")]}, config, version="v2"))
    assert "Ana" in (tmp_path / "memory.jsonl").read_text()
    server.push(tool_call("search_nodes", query="Ana"), answer("Ana: dentist on Tuesdays."))
    result = graph.invoke({"messages": [("user", "who is Ana?")]}, config, version="v2")
    found = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert found.status == "success" and "dentist on Tuesdays" in found.content

    # killed mid-session: a call while it is down is told so (not "no tool named"), with when it restarts; the
    # manager starts it again, and it answers once more
    os.kill(_server_pid(MEMORY), signal.SIGKILL)
    wait_for(lambda: {s.name: s.state for s in app.mcp_manager.status()}["memory"] == "unhealthy", timeout=20)
    server.push(tool_call("search_nodes", query="Ana"), answer("It is down."))
    result = graph.invoke({"messages": [("user", "who is Ana now?")]}, {"configurable": {"thread_id": "npm-down"}},
                          version="v2")
    down = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert down.status == "error" and "there is no tool named" not in down.content, down.content
    assert "search_nodes is a tool of the MCP server 'memory', which is not available right now" in down.content
    assert re.search(r"it restarts in \d+ s", down.content), down.content
    wait_for(lambda: {s.name: s.state for s in app.mcp_manager.status()}["memory"] == "ready", timeout=60,
             interval=0.2)
    assert {s.name: s for s in app.mcp_manager.status()}["memory"].restarts >= 1
    server.push(tool_call("search_nodes", query="Ana"), answer("Still there."))
    result = graph.invoke({"messages": [("user", "and now?")]}, {"configurable": {"thread_id": "npm-4"}}, version="v2")
    again = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert again.status == "success" and "dentist on Tuesdays" in again.content


def test_a_server_imported_while_jarvis_runs_is_used_without_a_restart(jarvis_env, tmp_path):
    proc = jarvis_env.cli("mcp", "import", str(_claude_file(tmp_path, jarvis_env.root, memory=False)))
    assert proc.returncode == 0, proc.stderr
    app = jarvis_env.app()
    assert "list_directory" in app.runtime.catalog.names() and "search_nodes" not in app.runtime.catalog.names()
    proc = jarvis_env.cli("mcp", "import", str(_claude_file(tmp_path, jarvis_env.root)))  # adds memory.toml
    assert proc.returncode == 0, proc.stderr
    wait_for(lambda: "search_nodes" in app.runtime.catalog.names(), timeout=60, interval=0.3)
    jarvis_env.server.push(tool_call("read_graph"), answer("Empty."))
    result = app.graph.invoke({"messages": [("user", "what do you remember?")]}, {"configurable": {"thread_id": "n"}},
                              version="v2")
    tool_msg = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert tool_msg.status == "success" and "entities" in tool_msg.content


def test_the_git_server_reads_and_commits_through_the_planner(jarvis_env, tmp_path):
    repo = jarvis_env.root / "project"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=Me", "-c", "user.email=me@example.org"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "plan.md").write_text("step one\n")
    subprocess.run([*git, "add", "plan.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (repo / "plan.md").write_text("step one\nstep two\n")
    claude = tmp_path / "claude_git.json"
    identity = {"GIT_AUTHOR_NAME": "Me", "GIT_AUTHOR_EMAIL": "me@example.org", "GIT_COMMITTER_NAME": "Me",
                "GIT_COMMITTER_EMAIL": "me@example.org"}
    claude.write_text(json.dumps({"mcpServers": {"git": {"command": str(GIT_SERVER), "env": identity,
                                                         "args": ["--repository", str(repo)]}}}))
    proc = jarvis_env.cli("mcp", "import", str(claude))
    assert proc.returncode == 0, proc.stderr
    app = jarvis_env.app()
    graph, server = app.graph, jarvis_env.server
    config = {"configurable": {"thread_id": "git-1"}}

    # a read runs at once and comes back as the server wrote it
    server.push(tool_call("git_status", repo_path=str(repo)), answer("plan.md changed."))
    result = graph.invoke({"messages": [("user", "what changed in my project?")]}, config, version="v2")
    status = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert status.status == "success" and "modified:   plan.md" in status.content

    # staging and committing change the repository: each asks first, and the commit lands
    server.push(tool_call("git_add", repo_path=str(repo), files=["plan.md"]), answer("Staged."))
    intr, result = _approve(graph, config, graph.invoke({"messages": [("user", "stage it")]}, config, version="v2"))
    assert intr.value["tool"] == "git_add"
    server.push(tool_call("git_commit", repo_path=str(repo), message="Add step two"), answer("Committed."))
    intr, result = _approve(graph, config, graph.invoke({"messages": [("user", "commit it")]}, config, version="v2"))
    assert intr.value["tool"] == "git_commit" and result.value["messages"][-1].content == "Committed."
    log = subprocess.run([*git, "log", "--format=%s"], capture_output=True, text=True, check=True).stdout
    assert log.splitlines() == ["Add step two", "first"]

    # a path outside the repository the server was given is the server's own refusal, and nothing changes
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    server.push(tool_call("git_status", repo_path=str(other)), answer("Not allowed."))
    result = graph.invoke({"messages": [("user", "and the other repo?")]}, {"configurable": {"thread_id": "git-2"}},
                          version="v2")
    refused = [m for m in result.value["messages"] if m.type == "tool"][-1]
    assert refused.status == "error" and "outside" in refused.content.lower(), refused.content
