#!/usr/bin/env python3
"""Fail when the project's own code holds a copy of more than 10 lines (tests and benchmarks aside).

Uses pylint's copy detector (symilar): lines compared after dropping comments, docstrings and import lines, so a
copy with other comments is still a copy. Python of orchestrator/, jarb_core/, integrations/ and scripts/, and the
web UI's JavaScript. A copy of 11 or more lines is one piece of logic written twice: make it one function.

    python scripts/check_copies.py            # exit 1 and each copy printed, or 0

tests/test_no_copies.py runs it, so `make test` fails on a new copy.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PYTHON_ROOTS = ("orchestrator", "jarb_core", "integrations", "scripts")
MAX_LINES = 10


def sources(repo: Path) -> tuple[list[Path], list[Path]]:
    """(Python files, JavaScript files)."""
    python = [p for root in PYTHON_ROOTS if (repo / root).is_dir() for p in sorted((repo / root).rglob("*.py"))]
    script = sorted((repo / "orchestrator").rglob("*.js")) if (repo / "orchestrator").is_dir() else []
    return [p for p in python if "__pycache__" not in p.parts], script


class _ImportStatements:
    """What symilar reads of a parsed module to drop its import lines: the import statements, with their lines. Read
    with Python's own parser: symilar's astroid.parse also infers names through every imported package (LangChain,
    LangGraph...), which took 20 of the check's 21 seconds."""

    def __init__(self, path: Path):
        self._tree = ast.parse(path.read_text(encoding="utf-8"))

    def nodes_of_class(self, kinds: Any) -> list[ast.AST]:
        return [node for node in ast.walk(self._tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def copies(files: list[Path], python: bool, min_lines: int = MAX_LINES + 1) -> tuple[int, str]:
    """(lines that are copies, symilar's report). Comments, docstrings and imports are read as Python's, so
    JavaScript is compared line by line as it is."""
    from pylint.checkers.symilar import Symilar

    sim = Symilar(min_lines=min_lines, ignore_comments=python, ignore_docstrings=python, ignore_imports=python)
    for path in files:
        with open(path, encoding="utf-8") as stream:
            sim.append_stream(str(path), stream, tree=_ImportStatements(path) if python else None)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        sim.run()
    report = out.getvalue()
    found = re.search(r"duplicates=(\d+)", report)
    return (int(found.group(1)) if found else 0), report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    python, script = sources(args.repo)
    duplicated = 0
    for files, is_python in ((python, True), (script, False)):
        if not files:
            continue
        found, report = copies(files, is_python)
        if found:
            print(report.strip(), file=sys.stderr)
        duplicated += found
    if duplicated:
        print(f"{duplicated} lines are copies of more than {MAX_LINES} lines; make each one function",
              file=sys.stderr)
        return 1
    print(f"no copy of more than {MAX_LINES} lines in {len(python) + len(script)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
