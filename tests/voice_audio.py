"""Real audio for the voice tests, made by the real tools: eSpeak NG speaking, ffmpeg's noise and silence sources."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

needs_voice_tools = pytest.mark.skipif(
    not (shutil.which("espeak-ng") and shutil.which("ffmpeg")),
    reason="espeak-ng and ffmpeg are not installed (scripts/install-system-deps.sh espeak-ng ffmpeg)")

VOICE = "en-us+edward"  # the config's default voice: the one the recogniser understands best (bench/voice.py)


def spoken(text: str, path: Path, *, lead_s: float = 0.0, trail_s: float = 0.0) -> Path:
    """`text` said by eSpeak NG into a file (`lead_s` of silence first, as a person draws breath, `trail_s` after:
    Chromium's fake microphone plays its file in a loop, so a recording of the question alone needs the gap)."""
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-v", VOICE, "-s", "160", "-w", str(raw), text], check=True, capture_output=True)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(raw), "-af", f"adelay={int(lead_s * 1000)}:all=1,apad=pad_dur={trail_s}",
                    "-ar", "48000", str(path)], check=True, capture_output=True)
    raw.unlink()
    return path


def generated(source: str, seconds: float, path: Path, *codec: str) -> Path:
    """An ffmpeg lavfi source (anoisesrc, anullsrc, sine) rendered for `seconds` into `path`."""
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", source, "-t", str(seconds), *codec,
                    str(path)], check=True, capture_output=True)
    return path
