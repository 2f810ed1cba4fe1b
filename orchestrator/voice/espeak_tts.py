"""Text to speech with eSpeak NG (Debian package `espeak-ng`): offline, instant, robotic but clear.

The text goes in on stdin, never as an argument (a text starting with "-" would be an option), and the voice name
is checked against a strict pattern before it reaches the command line."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from orchestrator.voice.base import VoiceError
from orchestrator.core.child_env import child_environment

VOICE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}(\+[A-Za-z0-9_-]{1,40})?")
TIMEOUT_S = 60.0


class ESpeakNG:
    name = "espeak-ng"

    def __init__(self) -> None:
        self.exe = shutil.which("espeak-ng")
        if not self.exe:
            raise VoiceError("eSpeak NG is not installed, so Jarvis cannot speak: install it with "
                             "scripts/install-system-deps.sh espeak-ng (or your package manager).", 503)

    def synthesize(self, text: str, voice: str, rate_wpm: int) -> bytes:
        if not VOICE_NAME.fullmatch(voice):
            raise VoiceError(f"{voice[:60]!r} is not a voice name (like 'en-us' or 'en-us+edward'; "
                             "`espeak-ng --voices` lists them).", 400)
        # Written to a file, not --stdout: on a pipe espeak-ng cannot go back to fill in the WAV header's sizes.
        with tempfile.TemporaryDirectory(prefix="jarvis-tts-") as tmp:
            out = Path(tmp) / "speech.wav"
            try:
                proc = subprocess.run([self.exe, "-w", str(out), "-b", "1", "-v", voice, "-s", str(rate_wpm)],
                                      input=text.encode("utf-8"), capture_output=True, timeout=TIMEOUT_S, check=False,
                                      env=child_environment())
            except subprocess.TimeoutExpired:
                raise VoiceError(f"eSpeak NG took over {TIMEOUT_S:.0f} s: speak a shorter text.", 422) from None
            wav = out.read_bytes() if out.exists() else b""
        if proc.returncode != 0:  # an unknown voice is the usual cause ("The specified voice does not exist")
            said = proc.stderr.decode("utf-8", "replace").strip()[:200]
            raise VoiceError(f"eSpeak NG could not speak with voice {voice!r}: {said or 'it failed'} "
                             "(`espeak-ng --voices` lists the voices; voice.voice in the config).", 400)
        if len(wav) <= 44:  # a WAV header and no samples: punctuation only, say
            raise VoiceError("There is nothing to say in this text (no words).", 400)
        return wav
