"""The engines by config name, and the two calls every front end uses: `transcribe` and `speak`.

Adding an engine (whisper.cpp, Piper, a cloud API) is a class with the methods of base.SpeechToText or
base.TextToSpeech, a name here, and that name in `voice.stt` / `voice.tts`.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from functools import cache
from pathlib import Path

from orchestrator.core.config import Settings
from orchestrator.voice.audio import decode
from orchestrator.voice.base import SpeechToText, TextToSpeech, Transcript, VoiceError
from orchestrator.voice.espeak_tts import ESpeakNG
from orchestrator.voice.pocketsphinx_stt import PocketSphinx
from orchestrator.voice.whisper_stt import FasterWhisper

log = logging.getLogger(__name__)

STT_ENGINES: dict[str, Callable[..., SpeechToText]] = {"faster-whisper": FasterWhisper, "pocketsphinx": PocketSphinx}
FALLBACK_STT = {"faster-whisper": "pocketsphinx"}  # where faster-whisper or its model is not installed
TTS_ENGINES: dict[str, Callable[[], TextToSpeech]] = {"espeak-ng": ESpeakNG}
MB = 1024 * 1024


@cache
def speech_to_text(name: str, whisper_model: Path | None = None) -> SpeechToText:
    if name not in STT_ENGINES:
        raise VoiceError(f"Unknown speech recogniser {name!r} (voice.stt); known: {', '.join(STT_ENGINES)}.", 503)
    try:
        return STT_ENGINES[name](whisper_model) if name == "faster-whisper" else STT_ENGINES[name]()
    except VoiceError as exc:
        if name not in FALLBACK_STT:
            raise
        log.warning("%s; using %s instead", exc, FALLBACK_STT[name])
        return speech_to_text(FALLBACK_STT[name])


@cache
def text_to_speech(name: str) -> TextToSpeech:
    if name not in TTS_ENGINES:
        raise VoiceError(f"Unknown speech synthesizer {name!r} (voice.tts); known: {', '.join(TTS_ENGINES)}.", 503)
    return TTS_ENGINES[name]()


def _enabled(settings: Settings) -> None:
    if not settings.voice.enabled:
        raise VoiceError("Voice is switched off (voice.enabled: false in the config).", 503)


def transcribe(settings: Settings, audio: bytes, language: str | None = None) -> Transcript:
    """A recording in any format `audio.decode` reads -> what was said. VoiceError when it cannot be used, or no
    speech was recognised in it (silence, noise)."""
    _enabled(settings)
    cfg = settings.voice
    if len(audio) > cfg.max_audio_mb * MB:
        raise VoiceError(f"The recording is larger than {cfg.max_audio_mb} MB (voice.max_audio_mb in the config): "
                         "ask in shorter pieces.", 413)
    language = (language or cfg.language).lower()
    engine = speech_to_text(cfg.stt, cfg.whisper_model)
    if language not in engine.languages:
        raise VoiceError(f"The speech recogniser {engine.name} has no model for {language[:20]!r}; it knows "
                         f"{', '.join(engine.languages)}.", 400)
    pcm = decode(audio, max_seconds=cfg.max_audio_s)
    text, confidence = engine.transcribe(pcm.data, pcm.sample_rate, language)
    if not text:
        raise VoiceError("No speech was recognised in the recording (it may be silent, noise only, or too quiet): "
                         "speak close to the microphone and try again.", 422)
    return Transcript(text=text, confidence=confidence, duration_s=round(pcm.duration_s, 2), language=language,
                      engine=engine.name)


def speakable(text: str, limit: int) -> str:
    """The text with control characters (escape sequences, NULs) made spaces; VoiceError when empty or too long."""
    cleaned = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Cs") else c for c in text)
    cleaned = " ".join(cleaned.split())
    if not cleaned:
        raise VoiceError("There is no text to speak.", 400)
    if len(cleaned) > limit:
        raise VoiceError(f"The text is longer than {limit} characters (voice.max_speak_chars in the config): "
                         "speak it in pieces, a sentence or a paragraph at a time.", 413)
    return cleaned


def speak(settings: Settings, text: str, voice: str | None = None) -> bytes:
    """Text -> a WAV file's bytes, in `voice` (default voice.voice)."""
    _enabled(settings)
    cfg = settings.voice
    return text_to_speech(cfg.tts).synthesize(speakable(text, cfg.max_speak_chars), voice or cfg.voice,
                                              cfg.rate_wpm)
