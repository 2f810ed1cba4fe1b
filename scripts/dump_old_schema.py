"""Write the SQLite schema an earlier commit of Jarvis makes into tests/data/schema/<db>-<commit>.sql, for the
migration tests (tests/test_migrations.py): the commit's tree is unpacked with `git archive` into a temporary
folder and its own code creates the databases, with every module that defines tables imported.

    .venv/bin/python scripts/dump_old_schema.py COMMIT
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "schema"

# Run by the old tree's Python path: import every module (models register their tables), then open the stores.
CREATE = r"""
import importlib, pkgutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import orchestrator
for m in pkgutil.walk_packages(orchestrator.__path__, "orchestrator."):
    if not any(x in m.name for x in ("cli", "web", "platform_graph", "llama_handler", "script_shim")):
        importlib.import_module(m.name)
try:  # the layout since the packages ([15]), then the flat one before it
    from orchestrator.core.config import settings_from_dict
    from orchestrator.storage.engines import engine_for, jarvis_engine
except ImportError:
    from orchestrator.config import settings_from_dict
    from orchestrator.storage import engine_for, jarvis_engine
from jarb_core.registry import ToolRegistry
out = Path(sys.argv[2])
s = settings_from_dict({"storage": {"data_dir": str(out)}}, out)
jarvis_engine(s)
ToolRegistry(engine_for(s, "tool_registry"))
"""


def main(commit: str) -> None:
    import sqlite3

    with tempfile.TemporaryDirectory() as tmp:
        tree, data = Path(tmp, "tree"), Path(tmp, "data")
        tree.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        subprocess.run([sys.executable, "-c", CREATE, str(tree), str(data)], check=True, cwd=tmp)
        OUT.mkdir(parents=True, exist_ok=True)
        for db in ("jarvis", "tool_registry"):
            with sqlite3.connect(data / f"{db}.sqlite") as conn:
                rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'")
                schema = ";\n".join(r[0] for r in rows) + ";\n"
            target = OUT / f"{db}-{commit[:7]}.sql"
            target.write_text(f"-- The {db} database as Jarvis {commit[:7]} made it (scripts/dump_old_schema.py). "
                              f"Do not edit.\n{schema}", encoding="utf-8")
            print(target)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
