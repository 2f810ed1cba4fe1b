"""scripts/check_copies.py runs with the tests (so `make test` fails on a new copy of more than 10 lines), and
finds one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "check_copies.py"


def test_the_project_has_no_copy_of_more_than_ten_lines():
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "no copy of more than 10 lines" in proc.stdout


def test_a_copy_with_other_comments_is_found_and_a_ten_line_one_is_not(tmp_path):
    body = "\n".join(f"    total += weigh(item_{i}, {i})" for i in range(11))
    (tmp_path / "orchestrator").mkdir()
    (tmp_path / "orchestrator" / "a.py").write_text(f"def first():\n    total = 0\n{body}\n    return total\n")
    (tmp_path / "orchestrator" / "b.py").write_text(
        f"def second():\n    # the same, with a comment\n    total = 0\n{body}\n    return -total\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--repo", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stdout
    assert "orchestrator/a.py" in proc.stderr and "orchestrator/b.py" in proc.stderr

    short = "\n".join(f"    total += weigh(item_{i}, {i})" for i in range(9))
    (tmp_path / "orchestrator" / "a.py").write_text(f"def first():\n    total = 0\n{short}\n    return total\n")
    (tmp_path / "orchestrator" / "b.py").write_text(f"def second():\n    total = 0\n{short}\n    return -total\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--repo", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
