"""Voice benchmark: real-time factor (processing time / audio duration) of speech synthesis (eSpeak NG) and of
transcription (ffmpeg decode + PocketSphinx), target < 0.5 each on this machine; and the word error rate of the
round trip, eSpeak NG's speech transcribed by PocketSphinx: sentence by sentence, the same sentences held apart in
one recording, and as webm/opus (what a browser's MediaRecorder sends).

    .venv/bin/python bench/voice.py
"""

from __future__ import annotations

import io
import subprocess
import sys
import time
import wave
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import isolated_settings, report  # noqa: E402

SENTENCES = [
    "what is the weather like today",
    "remind me to call my mother tomorrow morning",
    "open the calendar and show my meetings for next week",
    "please read my new email messages",
    "how long does it take to drive to the airport",
    "turn off the lights in the kitchen",
    "send a message to john saying i will be late",
    "what time is my first meeting tomorrow",
    "add milk and bread to my shopping list",
    "summarize the document i attached yesterday",
    "play some quiet music in the living room",
    "find the report about the budget from last month",
]
TARGET_RTF = 0.5


def wav_seconds(data: bytes) -> float:
    with wave.open(io.BytesIO(data)) as w:
        return w.getnframes() / w.getframerate()


def held_apart(wavs: list[bytes], pause_s: float = 1.0) -> bytes:
    """The sentences in one WAV, with `pause_s` of silence between them."""
    out = io.BytesIO()
    with wave.open(io.BytesIO(wavs[0])) as first:
        params = first.getparams()
    with wave.open(out, "wb") as joined:
        joined.setparams(params)
        gap = b"\0" * int(params.framerate * pause_s) * params.sampwidth
        for data in wavs:
            with wave.open(io.BytesIO(data)) as w:
                joined.writeframes(w.readframes(w.getnframes()) + gap)
    return out.getvalue()


def webm_opus(data: bytes) -> bytes:
    return subprocess.run(["ffmpeg", "-v", "error", "-threads", "1", "-i", "pipe:0", "-c:a", "libopus", "-b:a", "32k",
                           "-f", "webm", "pipe:1"], input=data, capture_output=True, check=True).stdout


def main() -> None:
    import jiwer

    from orchestrator.voice import speak, transcribe

    settings, _ = isolated_settings()
    speak(settings, "warm up")
    synth_s = audio_s = 0.0
    wavs = []
    for text in SENTENCES:
        start = time.perf_counter()
        wavs.append(speak(settings, text))
        synth_s += time.perf_counter() - start
        audio_s += wav_seconds(wavs[-1])

    heard, stt_s = [], 0.0
    for data in wavs:
        start = time.perf_counter()
        heard.append(transcribe(settings, data).text)
        stt_s += time.perf_counter() - start
    joined = held_apart(wavs)
    start = time.perf_counter()
    heard_joined = transcribe(settings, joined).text
    joined_rtf = (time.perf_counter() - start) / wav_seconds(joined)
    heard_webm = [transcribe(settings, webm_opus(data)).text for data in wavs]

    tts_rtf, stt_rtf = synth_s / audio_s, stt_s / audio_s
    figures = {
        "speech synthesized (s)": audio_s,
        "TTS real-time factor": tts_rtf,
        "TTS milliseconds per second of speech": 1000 * tts_rtf,
        "STT real-time factor (sentence by sentence)": stt_rtf,
        "STT real-time factor (held apart, one recording)": joined_rtf,
        "WER sentence by sentence": jiwer.wer(SENTENCES, heard),
        "WER held apart in one recording": jiwer.wer(" ".join(SENTENCES), heard_joined),
        "WER as webm/opus": jiwer.wer(SENTENCES, heard_webm),
    }
    worst = max(tts_rtf, stt_rtf, joined_rtf)
    report("voice: real-time factors (worst of TTS and STT) vs 0.5", figures, worst / TARGET_RTF, "<= 1.0",
           worst < TARGET_RTF)
    for said, got in zip(SENTENCES, heard, strict=True):
        if said != got:
            print(f"    said {said!r}\n    heard {got!r}")


if __name__ == "__main__":
    main()
