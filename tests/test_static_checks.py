"""The static checks run with the tests, so `make test` fails on a finding: ruff over the whole checkout (the rules
in pyproject.toml) and mypy over the kernel (the packages listed in pyproject.toml's [tool.mypy] `files`)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing():
    proc = _run("ruff", "check", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_finds_nothing():
    proc = _run("mypy")
    assert proc.returncode == 0, proc.stdout + proc.stderr
