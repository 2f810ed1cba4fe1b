"""The voice interface: what a speech-to-text and a text-to-speech engine must offer, and the one error type.

`VoiceError.status` is the HTTP status the API answers with, so every front end shows the same message for the
same problem (empty, too long, not audio, no speech heard, engine not installed)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol


class VoiceError(Exception):
    """Audio or text that cannot be used, or an engine that is not there; the message says what to do."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Transcript:
    text: str
    confidence: float  # 0..1, the engine's own estimate (PocketSphinx: per-word posterior, geometric mean)
    duration_s: float  # of the audio heard
    language: str
    engine: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SpeechToText(Protocol):
    name: str
    languages: tuple[str, ...]

    def transcribe(self, pcm: bytes, sample_rate: int, language: str) -> tuple[str, float]:
        """16-bit mono PCM -> (text, confidence); "" when no speech was recognised."""
        ...


class TextToSpeech(Protocol):
    name: str

    def synthesize(self, text: str, voice: str, rate_wpm: int) -> bytes:
        """Text -> a WAV file's bytes."""
        ...
