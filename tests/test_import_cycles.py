"""scripts/check_import_cycles.py runs with the tests (so `make test` fails on a new import cycle), and finds one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "check_import_cycles.py"


def test_the_project_has_no_import_cycle():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--stats"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "modules" in proc.stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def test_a_cycle_through_a_function_level_import_fails_with_the_cycle(tmp_path):
    _write(tmp_path, {
        "orchestrator/__init__.py": "",
        "orchestrator/a.py": "from .b import thing\n",
        "orchestrator/b.py": "def thing():\n    from .c import other\n    return other\n",
        "orchestrator/c.py": "from orchestrator import a\n",
        "orchestrator/d.py": "import orchestrator.a\n",  # imports into the cycle, is not part of it
    })
    proc = subprocess.run([sys.executable, str(SCRIPT), "--repo", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert "import cycle among 3 modules: orchestrator.a, orchestrator.b, orchestrator.c" in proc.stderr
    assert "orchestrator.b -> orchestrator.c (orchestrator/b.py:2)" in proc.stderr
    assert "orchestrator.d" not in proc.stderr


def test_type_checking_imports_count_and_unrelated_packages_do_not(tmp_path):
    _write(tmp_path, {
        "jarb_core/__init__.py": "",
        "jarb_core/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from jarb_core.y import Y\n",
        "jarb_core/y.py": "from . import x\nimport json\n",
        "integrations/__init__.py": "",
        "integrations/z.py": "from jarb_core import x\n",
    })
    proc = subprocess.run([sys.executable, str(SCRIPT), "--repo", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert "import cycle among 2 modules: jarb_core.x, jarb_core.y" in proc.stderr
    assert "1 import cycle(s)" in proc.stderr


def test_a_package_init_runs_before_its_submodule_so_it_is_part_of_the_cycle(tmp_path):
    """graph -> reminders.tools runs reminders/__init__ first, which imports reminders.scheduler -> graph."""
    _write(tmp_path, {
        "orchestrator/__init__.py": "",
        "orchestrator/graph.py": "from .reminders.tools import make\n",
        "orchestrator/reminders/__init__.py": "from .scheduler import Scheduler\n",
        "orchestrator/reminders/tools.py": "from .store import Store\n",
        "orchestrator/reminders/store.py": "Store = object\n",
        "orchestrator/reminders/scheduler.py": "from ..graph import build\nfrom . import store\n",
    })
    proc = subprocess.run([sys.executable, str(SCRIPT), "--repo", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert ("import cycle among 3 modules: orchestrator.graph, orchestrator.reminders, "
            "orchestrator.reminders.scheduler") in proc.stderr


def test_two_packages_importing_each_other_fail_even_without_a_module_cycle(tmp_path):
    """chat.graph -> tools.executor and tools.ledger -> chat.state: no module imports itself back, but the packages
    chat and tools depend on each other, which the one-way rule forbids."""
    _write(tmp_path, {
        "orchestrator/__init__.py": "",
        "orchestrator/chat/__init__.py": "",
        "orchestrator/chat/graph.py": "from orchestrator.tools.executor import run\n",
        "orchestrator/chat/state.py": "State = object\n",
        "orchestrator/tools/__init__.py": "",
        "orchestrator/tools/executor.py": "def run():\n    pass\n",
        "orchestrator/tools/ledger.py": "from orchestrator.chat.state import State\n",
    })
    proc = subprocess.run([sys.executable, str(SCRIPT), "--repo", str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    assert "import cycle among" not in proc.stderr
    assert "packages import each other: orchestrator.chat, orchestrator.tools" in proc.stderr
    assert "orchestrator.tools.ledger imports orchestrator.chat.state" in proc.stderr
