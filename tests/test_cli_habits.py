"""CLI habits people have ([18] item 5): the root's options after the command, `jarvis --version`."""

from __future__ import annotations

import yaml

from orchestrator.cli import hoist_global_options


def test_root_options_are_taken_after_the_command_too():
    assert hoist_global_options(["chat", "--profile", "demo", "hello"]) == ["--profile", "demo", "chat", "hello"]
    assert hoist_global_options(["threads", "list", "-v", "--config=x.yml"]) == ["-v", "--config=x.yml", "threads",
                                                                                 "list"]
    assert hoist_global_options(["chat", "--", "-v"]) == ["chat", "--", "-v"]  # after --: the message's own words
    assert hoist_global_options(["tools", "show", "wc", "--version", "2"]) == ["tools", "show", "wc", "--version",
                                                                                "2"]  # a command's own option


def test_the_cli_reads_the_config_named_after_the_command(jarvis_env):
    other = jarvis_env.path / "other.yml"
    cfg = yaml.safe_load(jarvis_env.config_path.read_text())
    cfg["profiles"] = {"quiet": {"planner": {"max_steps": 3}}}
    other.write_text(yaml.safe_dump(cfg))
    shown = jarvis_env.cli("threads", "list", "--config", str(other), "--profile", "nope")
    assert shown.returncode != 0 and "profile 'nope' not found" in shown.stderr and str(other) in shown.stderr
    ok = jarvis_env.cli("threads", "list", "--config", str(other), "--profile", "quiet")
    assert ok.returncode == 0, ok.stderr


def test_version(jarvis_env):
    out = jarvis_env.cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("jarvis ")


def test_an_unknown_thread_id_is_said_to_start_a_new_thread(jarvis_env):
    from tests.conftest import answer

    jarvis_env.server.push(answer("Hello."), answer("Again."))
    first = jarvis_env.cli("chat", "--thread", "cli-typo", "hello")
    assert first.returncode == 0 and "No thread 'cli-typo' yet: starting it" in first.stderr
    second = jarvis_env.cli("chat", "--thread", "cli-typo", "again")
    assert second.returncode == 0 and "No thread" not in second.stderr


def test_a_reminder_in_the_past_warns(jarvis_env):
    past = jarvis_env.cli("reminders", "create", "--title", "call mum", "--when", "2020-01-01T09:00:00")
    assert past.returncode == 0, past.stderr
    assert "that time has already passed" in past.stderr
    future = jarvis_env.cli("reminders", "create", "--title", "call dad", "--when", "2099-01-01T09:00:00")
    assert future.returncode == 0 and "already passed" not in future.stderr


def test_docs_search_with_no_match_says_so(jarvis_env):
    out = jarvis_env.cli("docs", "search", "quarterly zebra budget")
    assert out.returncode == 0, out.stderr
    assert "No passage matches 'quarterly zebra budget'" in out.stdout


def test_flags_are_shown_as_flags_in_help(jarvis_env):
    # Typer labelled every flag "<bool>", as if it took a value: `jarvis --verbose <bool>`.
    for args in (("--help",), ("run", "--help"), ("chat", "--help")):
        out = jarvis_env.cli(*args).stdout
        assert "--verbose" in out or "--no-services" in out or "--thread" in out, out
        assert "<bool>" not in out, out
    assert "<str>" in jarvis_env.cli("--help").stdout  # an option that takes a value still says what


def test_a_failed_turn_is_not_listed_as_running(jarvis_env):
    jarvis_env.server.push({"error": {"status": 400, "message": "the scripted model refuses this request"}})
    failed = jarvis_env.cli("chat", "--thread", "broken", "hello", check=False)
    assert failed.returncode != 0, failed.stdout
    listed = jarvis_env.cli_here("threads", "list").stdout
    (row,) = [line for line in listed.splitlines() if line.startswith("broken ")]
    assert "running" not in row and "idle" in row, listed
