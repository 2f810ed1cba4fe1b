"""The tests' forked `jarvis` commands (tests/cli_forks.py) behave as `jarvis` started afresh: the same exit code,
stdout and stderr for a command that succeeds, one that fails, one that reads stdin, and one that depends on the
environment and the working folder the test gives it (not the zygote's)."""

from __future__ import annotations

import subprocess

import pytest

from tests.cli_forks import Zygote
from tests.conftest import JARVIS_BIN, REPO


@pytest.mark.parametrize("args, input", [
    (["threads", "list"], None),
    (["threads", "show", "no-such-thread"], None),  # exits 1 with its reason on stderr
    (["secrets"], None),  # names the keyring backend the test's environment chose
    (["memory", "import", "-"], "this is not json\n"),  # reads stdin, refuses it
    (["no-such-command"], None),
])
def test_a_forked_command_says_and_exits_as_a_fresh_one(jarvis_env, args, input):
    (jarvis_env.path / "work").mkdir()
    cwd = str(jarvis_env.path / "work")
    fresh = subprocess.run([str(JARVIS_BIN), *args], input=input, capture_output=True, text=True, timeout=300,
                           env=jarvis_env.env(), cwd=cwd, stdin=None if input is not None else subprocess.DEVNULL)
    forked = Zygote.shared(REPO).run(str(JARVIS_BIN), args, env=jarvis_env.env(), cwd=cwd, input=input, timeout=300)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
