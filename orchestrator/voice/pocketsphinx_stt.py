"""Speech to text with PocketSphinx (CMU): small, fast on one core, fully offline; its US English acoustic model,
dictionary and language model ship inside the `pocketsphinx` wheel.

A new decoder per recording (about 0.2 s): a reused one carries its cepstral-mean estimate from one recording to
the next, so the same audio could give different words depending on what came before. Dither (seeded) keeps
digital silence, which browsers and synthesizers produce, from breaking the features; without it the word error
rate on eSpeak's speech was about twice as high. One recognition at a time per process, to keep CPU use modest.
"""

from __future__ import annotations

import threading

from orchestrator.voice.base import VoiceError

_one_at_a_time = threading.Lock()


class PocketSphinx:
    name = "pocketsphinx"
    languages = ("en-us",)

    def __init__(self) -> None:
        try:
            import pocketsphinx  # noqa: F401 - only checks it is installed
        except ImportError:
            raise VoiceError("The speech recogniser is not installed: pip install 'jarvis[voice]' (PocketSphinx).",
                             503) from None

    def transcribe(self, pcm: bytes, sample_rate: int, language: str) -> tuple[str, float]:
        from pocketsphinx import Decoder

        with _one_at_a_time:
            decoder = Decoder(samprate=sample_rate, dither=True, seed=1, loglevel="FATAL")
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
            hyp = decoder.hyp()
        text = " ".join((hyp.hypstr if hyp else "").split())
        if not text:
            return "", 0.0
        # hyp.prob is the posterior of the whole word sequence, which shrinks with its length; per word it reads as
        # a confidence (about 0.6 on a clean short sentence, under 0.1 on garbage).
        confidence = max(0.0, min(1.0, hyp.prob)) ** (1 / len(text.split()))
        return text, round(confidence, 3)
