"""Speech to text with PocketSphinx (CMU), the fallback where faster-whisper (whisper_stt.py) or its model is
missing: small, fully offline; its US English acoustic model, dictionary and language model ship inside the
`pocketsphinx` wheel. Its word error rate on eSpeak NG's speech (voice en-us+edward) is 0.28 on bench/voice.py's
sentences and 0.46 on held-apart ones (Whisper base: 0.03 and 0.04).

One decoder per process, loaded once (0.2 to 0.5 s), its front end reset before each recording
(`reinit_feat`, 0.1 ms): otherwise it carries its cepstral-mean estimate and its dither generator from one
recording to the next, and the same audio gives other words depending on what came before (with the reset, the
result is the one a fresh decoder gives). Dither (seeded) keeps digital silence, which browsers and synthesizers
produce, from breaking the features: without it the word error rate on eSpeak's speech was 0.73, with it 0.28.
One recognition at a time per process, which also keeps CPU use modest.
"""

from __future__ import annotations

import threading
from typing import Any

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
        self._decoders: dict[int, Any] = {}  # by sample rate; used under _one_at_a_time only

    def _decoder(self, sample_rate: int) -> Any:
        from pocketsphinx import Decoder

        if sample_rate not in self._decoders:
            self._decoders[sample_rate] = Decoder(samprate=sample_rate, dither=True, seed=1, loglevel="FATAL")
        return self._decoders[sample_rate]

    def transcribe(self, pcm: bytes, sample_rate: int, language: str) -> tuple[str, float]:
        with _one_at_a_time:
            decoder = self._decoder(sample_rate)
            decoder.reinit_feat()
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
