"""Voice benchmark: speech synthesis (eSpeak NG) and transcription by both recognisers, faster-whisper (Whisper base,
int8, the default) and PocketSphinx (the fallback): real-time factor (processing time / audio duration, ffmpeg decode
included) and word error rate of the round trip, eSpeak NG's speech transcribed: sentence by sentence, held-apart
sentences no engine was tuned on, the sentences held apart by a second of silence in one recording, and as webm/opus
(what a browser's MediaRecorder sends). Words are compared in lower case without punctuation (Whisper writes
"Who is my dentist?", PocketSphinx "who is my dentist"). Targets: TTS real-time factor < 0.5; the default
recogniser faster than real time (< 1.0) with a word error rate under 0.1.

    .venv/bin/python bench/voice.py
"""

from __future__ import annotations

import io
import re
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
# Held apart: written after the engines were chosen, what a new user asks first.
HELD_OUT = [
    "who is my dentist",
    "list the files in my home folder",
    "summarize the letter from the bank",
    "write a short note to my sister about the weekend",
    "what did the doctor say in her last email",
    "search my documents for the insurance contract",
    "remember that my neighbour is called paul",
    "cancel the reminder about the car",
]
TARGET_TTS_RTF = 0.5
TARGET_STT_RTF = 1.0
TARGET_WER = 0.1
ENGINES = ("faster-whisper", "pocketsphinx")


def words(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split())


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


def engine_figures(settings, engine: str, wavs: list[bytes], held: list[bytes], audio_s: float) -> dict[str, float]:
    import jiwer

    from orchestrator.voice import transcribe

    settings.voice.stt = engine
    transcribe(settings, wavs[0])  # loads the model: not counted
    heard, start = [], time.perf_counter()
    for data in wavs:
        heard.append(words(transcribe(settings, data).text))
    stt_rtf = (time.perf_counter() - start) / audio_s
    heard_held = [words(transcribe(settings, data).text) for data in held]
    joined = held_apart(wavs)
    start = time.perf_counter()
    heard_joined = words(transcribe(settings, joined).text)
    joined_rtf = (time.perf_counter() - start) / wav_seconds(joined)
    heard_webm = [words(transcribe(settings, webm_opus(data)).text) for data in wavs]
    for said, got in zip(SENTENCES + HELD_OUT, heard + heard_held, strict=True):
        if said != got:
            print(f"    {engine}: said {said!r}\n    {' ' * len(engine)}  heard {got!r}")
    return {
        f"{engine} real-time factor (sentence by sentence)": stt_rtf,
        f"{engine} real-time factor (held apart, one recording)": joined_rtf,
        f"{engine} WER sentence by sentence": jiwer.wer(SENTENCES, heard),
        f"{engine} WER on held-apart sentences": jiwer.wer(HELD_OUT, heard_held),
        f"{engine} WER held apart in one recording": jiwer.wer(" ".join(SENTENCES), heard_joined),
        f"{engine} WER as webm/opus": jiwer.wer(SENTENCES, heard_webm),
    }


def main() -> None:
    from orchestrator.voice import speak

    settings, _ = isolated_settings()
    speak(settings, "warm up")
    synth_s = audio_s = 0.0
    wavs = []
    for text in SENTENCES:
        start = time.perf_counter()
        wavs.append(speak(settings, text))
        synth_s += time.perf_counter() - start
        audio_s += wav_seconds(wavs[-1])
    held = [speak(settings, text) for text in HELD_OUT]

    tts_rtf = synth_s / audio_s
    figures = {"speech synthesized (s)": audio_s, "TTS real-time factor": tts_rtf,
               "TTS milliseconds per second of speech": 1000 * tts_rtf}
    for engine in ENGINES:
        figures.update(engine_figures(settings, engine, wavs, held, audio_s))
    default = ENGINES[0]
    rtf = max(figures[f"{default} real-time factor (sentence by sentence)"],
              figures[f"{default} real-time factor (held apart, one recording)"])
    wer = max(figures[f"{default} WER sentence by sentence"], figures[f"{default} WER on held-apart sentences"])
    ratio = max(tts_rtf / TARGET_TTS_RTF, rtf / TARGET_STT_RTF, wer / TARGET_WER)
    report(f"voice: TTS real-time factor vs {TARGET_TTS_RTF}, {default}'s vs {TARGET_STT_RTF} and its WER vs "
           f"{TARGET_WER} (the worst of the three)", figures, ratio, "<= 1.0", ratio <= 1.0)


if __name__ == "__main__":
    main()
