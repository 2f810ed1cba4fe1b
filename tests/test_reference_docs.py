"""The documentation stays true: the generated reference matches the code, the README stays a quick start, and
every link between the pages points at a file of the repository, and each picture of the UI a page shows is one the
UI tests take (tests/test_ui_browser.py's `guide_shot`), so it shows the UI as it is."""

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


IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")


def test_each_picture_of_the_ui_in_the_pages_is_taken_by_the_ui_tests():
    taken = set(re.findall(r'guide_shot\(page, "([^"]+)"', (REPO / "tests" / "test_ui_browser.py").read_text()))
    shown: dict[str, str] = {}
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for target in IMAGE.findall(page.read_text()):
            shown[str((page.parent / target).resolve().relative_to(REPO))] = str(page.relative_to(REPO))
    assert shown, "the guides show no picture of the UI"
    for image, page in shown.items():
        path = REPO / image
        assert image.startswith("docs/images/") and path.stem in taken, f"{page} shows {image}, which no UI test takes"
        assert path.exists(), f"{page} shows {image}: run tests/test_ui_browser.py to take it"
        assert path.stat().st_size < 100_000, f"{image} is {path.stat().st_size} bytes: keep the pictures small"
