"""Voice ([22]): eSpeak NG's speech transcribed by faster-whisper (Whisper base, the default) and by PocketSphinx
(the fallback) within a word error rate floor, on the sentences and on held-apart ones neither was tuned on; the
fallback where the Whisper model is missing; bad audio refused with a clear error (empty, noise, two hours, not
audio, a playlist naming another file), the API's limits and token, and the CLI's `jarvis say` and
`jarvis chat --audio / --voice`."""

from __future__ import annotations

import io
import re
import wave

import pytest

from tests.conftest import answer
from tests.ui_server import ui_server  # noqa: F401 - fixture
from tests.voice_audio import generated, needs_voice_tools, spoken

pytestmark = needs_voice_tools

# Short requests an assistant hears.
SENTENCES = ["what is the weather like today", "turn off the lights in the kitchen",
             "remind me to call my mother tomorrow morning", "find the report about the budget from last month"]
# Held apart: written after the engines were chosen and tuned, what a new user asks first.
HELD_OUT = ["who is my dentist", "list the files in my home folder", "summarize the letter from the bank",
            "write a short note to my sister about the weekend"]
WER_FLOOR = 0.25  # PocketSphinx on these four (bench/voice.py: 0.28 on its twelve, 0.46 on held-apart ones)
WHISPER_FLOOR = 0.1  # faster-whisper with Whisper base (int8): 0.03 and 0.04 in bench/voice.py


def words(text: str) -> str:
    """Lower case without punctuation: Whisper writes "Who is my dentist?", PocketSphinx "who is my dentist"."""
    return " ".join(re.sub(r"[^\w\s']", " ", text.lower()).split())


def wer(said: list[str] | str, heard: list[str] | str) -> float:
    import jiwer

    if isinstance(said, str):
        return jiwer.wer(words(said), words(heard))  # type: ignore[arg-type]
    return jiwer.wer([words(s) for s in said], [words(h) for h in heard])


@pytest.fixture
def settings(jarvis_env):
    return jarvis_env.settings


@pytest.mark.parametrize("engine, floor", [("faster-whisper", WHISPER_FLOOR), ("pocketsphinx", WER_FLOOR)])
def test_spoken_sentences_come_back_as_text(settings, engine, floor):
    from orchestrator.voice import speak, transcribe

    settings.voice.stt = engine
    wavs = [speak(settings, s) for s in SENTENCES]
    heard = [transcribe(settings, w) for w in wavs]
    assert wer(SENTENCES, [h.text for h in heard]) <= floor, [h.text for h in heard]
    first = heard[0]
    with wave.open(io.BytesIO(wavs[0])) as w:
        assert abs(first.duration_s - w.getnframes() / w.getframerate()) < 0.05
    assert 0 < first.confidence <= 1 and first.engine == engine and first.language == "en-us"

    # the same sentences held apart by a second of silence, in one recording
    out = io.BytesIO()
    with wave.open(out, "wb") as joined:
        for i, data in enumerate(wavs):
            with wave.open(io.BytesIO(data)) as w:
                if i == 0:
                    joined.setparams(w.getparams())
                joined.writeframes(w.readframes(w.getnframes()) + b"\0\0" * w.getframerate())
    together = transcribe(settings, out.getvalue()).text
    assert wer(" ".join(SENTENCES), together) <= floor, together


def test_whisper_is_the_default_and_understands_what_a_new_user_asks(settings):
    from orchestrator.voice import speak, transcribe

    assert settings.voice.stt == "faster-whisper"
    heard = [transcribe(settings, speak(settings, s)) for s in HELD_OUT]
    assert {h.engine for h in heard} == {"faster-whisper"}
    assert wer(HELD_OUT, [h.text for h in heard]) <= WHISPER_FLOOR, [h.text for h in heard]


def test_without_the_whisper_model_pocketsphinx_is_used(settings, tmp_path):
    from orchestrator.voice import speak, transcribe

    settings.voice.whisper_model = tmp_path / "no-model-here"
    heard = transcribe(settings, speak(settings, SENTENCES[1]))
    assert heard.engine == "pocketsphinx" and wer(SENTENCES[1], heard.text) <= WER_FLOOR, heard


def test_a_recording_is_heard_the_same_whatever_came_before(settings):
    # The recogniser is loaded once per process; what it adapted to in one recording must not change the next.
    from orchestrator.voice import speak, transcribe

    wavs = [speak(settings, s) for s in SENTENCES]
    alone = transcribe(settings, wavs[2])
    for before in (wavs[0], wavs[3], wavs[1]):
        transcribe(settings, before)
        assert transcribe(settings, wavs[2]) == alone


def test_what_browsers_record_is_decoded(settings, tmp_path):
    import subprocess

    from orchestrator.voice import transcribe

    wav = spoken(SENTENCES[0], tmp_path / "q.wav")
    for codec, suffix in ((["-c:a", "libopus"], "webm"), (["-c:a", "libopus"], "ogg"), ([], "mp3"), ([], "flac")):
        other = tmp_path / f"q.{suffix}"
        subprocess.run(["ffmpeg", "-v", "error", "-i", str(wav), *codec, str(other)], check=True)
        assert wer([SENTENCES[0]], [transcribe(settings, other.read_bytes()).text]) <= WER_FLOOR, suffix


def _two_hours(tmp_path):
    # FLAC of silence: two hours in a few hundred KB, under the size limit, so the duration limit is what refuses it
    return generated("anullsrc=r=8000:cl=mono", 7200, tmp_path / "long.flac")


@pytest.mark.parametrize("case, status, words", [
    ("empty", 400, "is empty"),
    ("noise", 422, "No speech was recognised"),
    ("silence", 422, "No speech was recognised"),
    ("two_hours", 413, "longer than 60 s (voice.max_audio_s"),
    ("text", 415, "not audio Jarvis can read"),
    ("video_only", 415, "no audio track"),
])
def test_bad_audio_gets_a_clear_error(ui_server, tmp_path, case, status, words):
    data = {
        "empty": lambda: b"",
        "noise": lambda: generated("anoisesrc=c=pink:a=0.4", 3, tmp_path / "noise.wav").read_bytes(),
        "silence": lambda: generated("anullsrc=r=16000:cl=mono", 3, tmp_path / "quiet.ogg").read_bytes(),
        "two_hours": lambda: _two_hours(tmp_path).read_bytes(),
        "text": lambda: b"%PDF-1.4\nnot a recording at all\n" * 50,
        "video_only": lambda: generated("testsrc=size=64x64:rate=5", 1, tmp_path / "v.webm").read_bytes(),
    }[case]()
    with ui_server.client() as c:
        resp = c.post("/api/transcribe", content=data, headers={"Content-Type": "audio/webm"})
    assert resp.status_code == status, resp.text
    assert words in resp.json()["detail"], resp.json()


def test_a_playlist_naming_another_file_is_not_read(settings, tmp_path):
    # ffmpeg follows an HLS playlist to the files it names: a "recording" that is a playlist would have Jarvis
    # transcribe (or fetch) whatever the sender names. Only audio containers and the file given are read.
    import subprocess

    from orchestrator.voice import VoiceError, transcribe

    secret = tmp_path / "secret.mp3"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(spoken(SENTENCES[1], tmp_path / "s.wav")),
                    str(secret)], check=True)
    assert "kitchen" in transcribe(settings, secret.read_bytes()).text  # readable when sent itself
    playlist = f"#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\n{secret}\n#EXT-X-ENDLIST\n".encode()
    with pytest.raises(VoiceError, match="not audio Jarvis can read") as refused:
        transcribe(settings, playlist)
    assert refused.value.status == 415


def test_recordings_are_bounded_while_they_stream_in(ui_server):
    ui_server.app.state.jarvis.settings.voice.max_audio_mb = 1

    def chunks():
        for _ in range(40):
            yield b"\0" * 65536

    with ui_server.client() as c:
        announced = c.post("/api/transcribe", content=b"\0" * (2 * 1024 * 1024))
        streamed = c.post("/api/transcribe", content=chunks())
    for resp in (announced, streamed):
        assert resp.status_code == 413 and "voice.max_audio_mb" in resp.json()["detail"], resp.text


def test_a_recording_is_not_held_to_the_json_request_limit(ui_server, tmp_path):
    # server.max_request_kb bounds JSON bodies; a recording has its own limit (voice.max_audio_mb), like uploads
    ui_server.app.state.jarvis.settings.server.max_request_kb = 64
    question = spoken(SENTENCES[0], tmp_path / "q.wav").read_bytes()
    assert len(question) > 64 * 1024
    with ui_server.client() as c:
        resp = c.post("/api/transcribe", content=question, headers={"Content-Type": "audio/wav"})
    assert resp.status_code == 200 and "weather" in resp.json()["text"], resp.text


def test_the_voice_endpoints_need_the_token(ui_server, tmp_path):
    question = spoken(SENTENCES[0], tmp_path / "q.wav").read_bytes()
    with ui_server.client(token="") as c:
        assert c.post("/api/transcribe", content=question).status_code == 401
        assert c.post("/api/speak", json={"text": "hello"}).status_code == 401
        assert c.get("/api/voice").status_code == 401


def test_speak_answers_a_wav_that_is_understood(ui_server):
    with ui_server.client() as c:
        assert c.get("/api/voice").json()["available"] is True
        resp = c.post("/api/speak", json={"text": "Turn off the lights in the kitchen."})
        assert resp.status_code == 200 and resp.headers["content-type"] == "audio/wav"
        heard = c.post("/api/transcribe", content=resp.content).json()
    assert wer([SENTENCES[1]], [heard["text"]]) <= WER_FLOOR, heard


def test_speak_refuses_what_it_cannot_say(ui_server):
    ui_server.app.state.jarvis.settings.voice.max_speak_chars = 100
    with ui_server.client() as c:
        too_long = c.post("/api/speak", json={"text": "word " * 100})
        assert too_long.status_code == 413 and "voice.max_speak_chars" in too_long.json()["detail"]
        for voice in ("--help", "en -w /tmp/x", "nosuchvoice"):
            bad = c.post("/api/speak", json={"text": "hello", "voice": voice})
            assert bad.status_code == 400 and "voice" in bad.json()["detail"], (voice, bad.text)
        assert c.post("/api/speak", json={"text": " \x00\x1b "}).status_code == 400
        # a text that looks like an option is said, not obeyed (it goes in on stdin)
        said = c.post("/api/speak", json={"text": "--version"})
        assert said.status_code == 200 and said.content[:4] == b"RIFF"


def test_an_unknown_language_or_voice_switched_off_is_said(ui_server, tmp_path):
    question = spoken(SENTENCES[0], tmp_path / "q.wav").read_bytes()
    with ui_server.client() as c:
        resp = c.post("/api/transcribe?language=fr-fr", content=question)
        assert resp.status_code == 400 and "en-us" in resp.json()["detail"]
        ui_server.app.state.jarvis.settings.voice.enabled = False
        resp = c.post("/api/transcribe", content=question)
        assert resp.status_code == 503 and "voice.enabled" in resp.json()["detail"]
        assert c.get("/api/voice").json()["available"] is False


# -- CLI ------------------------------------------------------------------------------------------------------
# No sound device for the players and recorders: what a server or a container has. The libraries' own settings say
# so (an ALSA configuration without devices, PulseAudio and PipeWire servers that are not there).
def _no_sound(jarvis_env, tmp_path):
    (tmp_path / "asound.conf").write_text("")
    env = jarvis_env.env()
    env.update(ALSA_CONFIG_PATH=str(tmp_path / "asound.conf"), PULSE_SERVER=f"unix:{tmp_path}/no-pulse",
               PIPEWIRE_REMOTE=str(tmp_path / "no-pipewire"), SDL_AUDIODRIVER="alsa")
    return env


def _cli(jarvis_env, env, *args, input=None):
    return jarvis_env.cli(*args, input=input, env=env)


def test_jarvis_say_writes_or_plays_the_speech(jarvis_env, tmp_path):
    from orchestrator.voice import transcribe

    out = tmp_path / "said.wav"
    done = jarvis_env.cli("say", "--out", str(out), "What", "is", "the", "weather", "like", "today?", check=True)
    assert done.stdout.strip() == str(out)
    assert wer([SENTENCES[0]], [transcribe(jarvis_env.settings, out.read_bytes()).text]) <= WER_FLOOR
    silent = _cli(jarvis_env, _no_sound(jarvis_env, tmp_path), "say", "hello")
    assert silent.returncode == 1 and "could not play the speech" in silent.stderr and "--out" in silent.stderr


def test_jarvis_chat_takes_a_recorded_question(jarvis_env, tmp_path):
    question = spoken("what is the weather like today", tmp_path / "q.webm")
    jarvis_env.server.push(answer("Sunny, 21 degrees."))
    done = jarvis_env.cli("chat", "--audio", str(question), check=True)
    assert "Sunny, 21 degrees." in done.stdout and "(heard" in done.stderr
    sent = [m["content"] for m in jarvis_env.server.requests[0]["messages"] if m["role"] == "user"]
    assert wer([SENTENCES[0]], [sent[-1]]) <= WER_FLOOR, sent


def test_jarvis_chat_says_why_a_recording_or_microphone_cannot_be_used(jarvis_env, tmp_path):
    noise = generated("anoisesrc=c=white:a=0.3", 2, tmp_path / "noise.wav")
    failed = jarvis_env.cli("chat", "--audio", str(noise))
    assert failed.returncode == 1 and "No speech was recognised" in failed.stderr
    missing = jarvis_env.cli("chat", "--audio", str(tmp_path / "nope.wav"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    no_mic = _cli(jarvis_env, _no_sound(jarvis_env, tmp_path), "chat", "--voice")
    assert no_mic.returncode == 1 and "no microphone found" in no_mic.stderr and "--audio FILE" in no_mic.stderr
    assert jarvis_env.server.requests == []  # nothing was sent to the model
