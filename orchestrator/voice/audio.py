"""Any recording a browser or a phone makes (webm/opus, ogg, wav, mp3, flac, m4a) -> 16 kHz mono 16-bit PCM, by
ffmpeg in a subprocess (one thread, a wall-clock timeout).

ffmpeg reads far more than audio files: a playlist (HLS, concat) makes it open other files or URLs named inside
it. So the input is a file in a private temporary folder, only the `file` protocol is allowed, and only the
demuxers of audio containers (`-format_whitelist`); anything else is "not audio". Decoding stops a little past
`max_seconds`, so a two-hour file costs no more than a long question before it is refused.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from orchestrator.voice.base import VoiceError
from orchestrator.core.child_env import child_environment

SAMPLE_RATE = 16_000
# ffmpeg demuxer names; "matroska,webm" is one demuxer (MediaRecorder's webm), "mov,mp4,m4a,..." another (Safari).
AUDIO_DEMUXERS = "wav,w64,ogg,matroska,webm,mp3,flac,mov,mp4,m4a,aac,caf"
FORMATS_HINT = "webm/opus, ogg, wav, mp3, flac or m4a"
DECODE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Pcm:
    data: bytes  # signed 16-bit little-endian, mono
    sample_rate: int

    @property
    def duration_s(self) -> float:
        return len(self.data) / 2 / self.sample_rate


def ffmpeg_path() -> str:
    found = shutil.which("ffmpeg")
    if not found:
        raise VoiceError("ffmpeg is not installed, so recordings cannot be decoded: install it with "
                         "scripts/install-system-deps.sh ffmpeg (or your package manager).", 503)
    return found


def decode(data: bytes, *, max_seconds: float, sample_rate: int = SAMPLE_RATE) -> Pcm:
    """Decode the first audio track; VoiceError (with the HTTP status to answer) when it cannot be used."""
    if not data:
        raise VoiceError("The recording is empty (0 bytes): record again, and check that the browser may use the "
                         "microphone.", 400)
    cmd = [ffmpeg_path(), "-nostdin", "-hide_banner", "-loglevel", "error", "-threads", "1",
           "-protocol_whitelist", "file", "-format_whitelist", AUDIO_DEMUXERS]
    with tempfile.TemporaryDirectory(prefix="jarvis-audio-") as tmp:
        source = Path(tmp) / "recording"  # no extension: ffmpeg tells the format from the bytes
        source.write_bytes(data)
        cmd += ["-i", str(source), "-map", "0:a:0", "-vn", "-t", f"{max_seconds + 0.5:.3f}",
                "-ac", "1", "-ar", str(sample_rate), "-f", "s16le", "pipe:1"]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=DECODE_TIMEOUT_S, check=False,
                                  env=child_environment())
        except subprocess.TimeoutExpired:
            raise VoiceError(f"Decoding the recording took over {DECODE_TIMEOUT_S:.0f} s: send a shorter one, as "
                             f"{FORMATS_HINT}.", 422) from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace")
        if "matches no streams" in err:
            raise VoiceError("The file has no audio track: send a recording (" + FORMATS_HINT + ").", 415)
        raise VoiceError(f"This is not audio Jarvis can read: send {FORMATS_HINT}.", 415)
    pcm = Pcm(proc.stdout, sample_rate)
    if pcm.duration_s > max_seconds:
        raise VoiceError(f"The recording is longer than {max_seconds:g} s (voice.max_audio_s in the config): "
                         "ask in shorter pieces.", 413)
    if pcm.duration_s < 0.1:
        raise VoiceError("The recording holds no sound (under 0.1 s of audio): record again.", 422)
    return pcm
