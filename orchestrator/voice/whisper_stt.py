"""Speech to text with faster-whisper (Whisper base, CTranslate2, int8 on the CPU): the default recogniser.

PocketSphinx understood 0 of 3 spoken questions a user tried, and on eSpeak NG's speech its word error rate was
0.36 to 0.79 by voice; Whisper base's is a few hundredths (bench/voice.py has both). The model is Whisper base in
CTranslate2's format, fetched by `make` into data/models/whisper-base by pinned versions and sha256
(scripts/fetch_whisper_model.py); `voice.whisper_model` points elsewhere. Loaded once per process (about 1 s),
two threads, one recognition at a time. Where faster-whisper or the model is missing, `engines.speech_to_text`
falls back to PocketSphinx and says so in the log.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from orchestrator.voice.base import VoiceError

DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "data" / "models" / "whisper-base"
_one_at_a_time = threading.Lock()


def model_folder(configured: Path | None = None) -> Path:
    return Path(configured).expanduser() if configured else DEFAULT_MODEL


class FasterWhisper:
    name = "faster-whisper"
    languages = ("en-us", "en")

    def __init__(self, folder: Path | None = None, threads: int = 2) -> None:
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise VoiceError("The speech recogniser is not installed: pip install 'jarvis[voice]' (faster-whisper).",
                             503) from None
        folder = model_folder(folder)
        if not (folder / "model.bin").is_file():
            raise VoiceError(f"The Whisper model is not in {folder}: run `make whisper-model`.", 503)
        self._model: Any = WhisperModel(str(folder), device="cpu", compute_type="int8", cpu_threads=threads)

    def transcribe(self, pcm: bytes, sample_rate: int, language: str) -> tuple[str, float]:
        import numpy as np

        if sample_rate != 16_000:
            raise VoiceError(f"faster-whisper reads 16 kHz audio, not {sample_rate} Hz.", 400)
        audio = np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768.0
        with _one_at_a_time:
            segments, _ = self._model.transcribe(audio, language=language.split("-")[0], beam_size=5,
                                                 condition_on_previous_text=False, vad_filter=False)
            heard = [s for s in segments if s.no_speech_prob < 0.6 and s.text.strip()]
        text = " ".join(" ".join(s.text for s in heard).split())
        if not text:
            return "", 0.0
        # avg_logprob is the mean log-probability of a segment's tokens: its exp reads as a per-token confidence
        confidence = sum(math.exp(s.avg_logprob) for s in heard) / len(heard)
        return text, round(max(0.0, min(1.0, confidence)), 3)
