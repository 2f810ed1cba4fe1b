"""`jarvis tools ...`: register by hand, list, show, test, disable/enable, trust.

The first test drives the real `jarvis` binary; the others call the same Typer app in-process (each binary start
costs seconds of imports), with the same configuration file, databases and sandbox.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from tests.jarb_helpers import BUGGY_WORD_COUNT, FIXED_WORD_COUNT, WORD_COUNT_SPEC, WORD_COUNT_TESTS

pytestmark = pytest.mark.slow


@pytest.fixture
def env(jarvis_env):
    jarvis_env.write_config(sandbox={"required": True})
    files = jarvis_env.path / "src"
    files.mkdir()
    (files / "spec.json").write_text(json.dumps(WORD_COUNT_SPEC))
    (files / "good.py").write_text(FIXED_WORD_COUNT)
    (files / "buggy.py").write_text(BUGGY_WORD_COUNT)
    (files / "tests.py").write_text(WORD_COUNT_TESTS)
    jarvis_env.files = files
    return jarvis_env


def run(env, *args: str, check: bool = False):
    """The CLI in-process; the result looks like the subprocess one (returncode, stdout, stderr)."""
    from orchestrator.cli import app

    result = CliRunner().invoke(app, list(args), env={"JARVIS_CONFIG": str(env.config_path)})
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)
    if check and out.returncode != 0:
        raise AssertionError(f"jarvis {' '.join(args)} exited {out.returncode}\n{out.stdout}\n{out.stderr}")
    return out


def run_json(env, *args: str):
    return json.loads(run(env, *args, check=True).stdout)


def register(env, module="good.py", *extra, spec="spec.json", tests="tests.py", binary: bool = False):
    f = env.files
    args = ("tools", "register", "--spec", str(f / spec), "--module", str(f / module), "--tests", str(f / tests), *extra)
    return env.cli(*args) if binary else run(env, *args)


def test_register_list_show(env):
    done = register(env, binary=True)
    assert done.returncode == 0, done.stderr
    assert "registered word_count v1" in done.stdout and "3 passed" in done.stdout
    assert "[run_tests] testing word_count in the sandbox" in done.stderr

    rows = env.cli_json("tools", "list", "--json")
    mine = next(r for r in rows if r["name"] == "word_count")
    assert mine == {**mine, "source": "generated", "version": 1, "status": "active", "in_use": True, "trust": "confirm",
                    "side_effects": []}
    static = next(r for r in rows if r["name"] == "fs_write_text")
    assert static["source"] == "static" and static["side_effects"] == ["fs_write"] and static["trust"] == "policy"

    table = run(env, "tools", "list", check=True).stdout
    assert "word_count" in table and "generated" in table and "active*" in table
    shown = run(env, "tools", "show", "word_count", check=True).stdout
    assert "in use: v1" in shown and "3 passed" in shown and "text: str" in shown
    detail = run_json(env, "tools", "show", "word_count", "--json")
    assert detail["versions"][0]["sha256"] and detail["in_use"] == 1


def test_failing_tests_are_printed_and_nothing_registered(env):
    failed = register(env, "buggy.py")
    assert failed.returncode == 1
    assert "test_empty" in failed.stdout and "assert 1 == 0" in failed.stdout
    assert "not registered: tests failed: 2 failed, 1 passed" in failed.stderr
    assert not any(r["name"] == "word_count" for r in run_json(env, "tools", "list", "--json"))

    (env.files / "bad.json").write_text('{"name": "Word Count"')
    bad = register(env, spec="bad.json")
    assert bad.returncode == 1 and "not valid JSON" in bad.stderr


def test_network_needs_explicit_approval(env):
    spec = {"name": "page_title", "description": "Title of a page.", "return_type": "str", "side_effects": ["network"],
            "args": [{"name": "url", "type": "str", "description": "URL"}]}
    (env.files / "net.json").write_text(json.dumps(spec))
    (env.files / "net.py").write_text("import urllib.request\n\n\ndef page_title(url: str) -> str:\n"
                                      "    return urllib.request.urlopen(url).read().decode()[:50]\n")
    (env.files / "net_tests.py").write_text("from page_title import page_title\n\n\ndef test_callable():\n"
                                            "    assert callable(page_title)\n")
    refused = register(env, "net.py", spec="net.json", tests="net_tests.py")
    assert refused.returncode == 1 and "--approve-network" in refused.stderr
    done = register(env, "net.py", "--approve-network", spec="net.json", tests="net_tests.py")
    assert done.returncode == 0, done.stderr
    row = next(r for r in run_json(env, "tools", "list", "--json") if r["name"] == "page_title")
    assert row["network_approved"] is True

    (env.files / "sneaky.json").write_text(json.dumps({**spec, "name": "sneaky", "side_effects": []}))
    (env.files / "sneaky.py").write_text((env.files / "net.py").read_text().replace("page_title", "sneaky"))
    (env.files / "sneaky_tests.py").write_text((env.files / "net_tests.py").read_text().replace("page_title", "sneaky"))
    sneaky = register(env, "sneaky.py", spec="sneaky.json", tests="sneaky_tests.py")
    assert sneaky.returncode == 1 and "does not declare the side effect 'network'" in sneaky.stderr


def test_versions_retest_disable_enable_trust(env):
    assert register(env).returncode == 0
    (env.files / "v2.py").write_text(FIXED_WORD_COUNT.replace('"""Count the words in text."""', '"""Words."""'))
    (env.files / "tests2.py").write_text(WORD_COUNT_TESTS + "\n\ndef test_newlines():\n    assert word_count('a\\nb') == 2\n")
    assert register(env, "v2.py", tests="tests2.py").returncode == 0

    both = run(env, "tools", "test", "word_count", "--with-old-tests")
    assert both.returncode == 0, both.stdout + both.stderr
    assert "7 passed" in both.stdout  # v1's 3 tests and v2's 4, against v2

    # a test that now fails marks v2 failed: v1 serves again
    tests_v2 = env.path / "tools" / "tests" / "test_word_count_v2.py"
    tests_v2.write_text(tests_v2.read_text() + "\n\ndef test_broken():\n    assert word_count('a') == 5\n")
    broken = run(env, "tools", "test", "word_count")
    assert broken.returncode == 1 and "test_broken" in broken.stdout and "status is now failed" in broken.stderr
    assert run_json(env, "tools", "show", "word_count", "--json")["in_use"] == 1
    enabled = run(env, "tools", "enable", "word_count", "--version", "2", check=True)
    assert "word_count in use: v2" in enabled.stdout

    disabled = run(env, "tools", "disable", "word_count", check=True)
    assert "word_count in use: none" in disabled.stdout
    run(env, "tools", "enable", "word_count", check=True)
    trusted = run(env, "tools", "trust", "word_count", check=True)
    assert "trust policy" in trusted.stdout
    assert run_json(env, "tools", "show", "word_count", "--json")["versions"][1]["trust"] == "policy"

    module_v2 = env.path / "tools" / "word_count_v2.py"
    module_v2.write_text(module_v2.read_text() + "# edited by hand\n")
    tampered = run(env, "tools", "test", "word_count")
    assert tampered.returncode == 1 and "was changed after it was registered" in tampered.stderr

    missing = run(env, "tools", "trust", "nothing_here")
    assert missing.returncode == 1 and "no generated tool nothing_here" in missing.stderr
