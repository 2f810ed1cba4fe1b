"""Checkpoints written before the package layout name the chat state's classes by their old module
(`orchestrator.state`); a thread paused then (a confirmation waiting on a ToolTask) must still load after an
upgrade, and a class outside the allowed modules must still be refused."""

from __future__ import annotations

from orchestrator.chat.state import ToolTask
from orchestrator.storage.engines import checkpoint_serde


def test_a_state_class_saved_under_its_old_module_name_loads(monkeypatch):
    serde = checkpoint_serde()
    task = ToolTask(call={"name": "fs_write_text", "args": {"path": "a.txt"}, "id": "c1"}, index=0)
    monkeypatch.setattr(ToolTask, "__module__", "orchestrator.state")  # how the old layout wrote it
    old = serde.dumps_typed(task)
    monkeypatch.undo()
    assert b"orchestrator.state" in old[1] and b"orchestrator.chat.state" not in old[1]
    loaded = checkpoint_serde().loads_typed(old)
    assert isinstance(loaded, ToolTask) and loaded.call["args"] == {"path": "a.txt"}


def test_a_class_from_elsewhere_is_still_not_rebuilt(monkeypatch):
    from orchestrator.core.config import Settings

    serde = checkpoint_serde()
    settings = Settings()
    blob = serde.dumps_typed(settings)
    loaded = serde.loads_typed(blob)
    assert not isinstance(loaded, Settings)
