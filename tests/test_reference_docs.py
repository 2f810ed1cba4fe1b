"""The documentation stays true: the generated reference matches the code, the README stays a quick start, and
every link between the pages points at a file of the repository."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import REPO

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_generated_reference_is_what_the_code_says():
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr


def test_the_readme_is_a_quick_start():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move the details to a guide in docs/"
    first_screen = "\n".join(lines[:40])
    assert "make run" in first_screen and "make test" in first_screen


def test_every_link_between_the_pages_points_at_a_file_of_the_repository():
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):  # https:, mailto: ... pages outside are named, not linked as files
                continue
            resolved = (page.parent / target).resolve()
            if not resolved.is_relative_to(REPO) or not resolved.exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken
