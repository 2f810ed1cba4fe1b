"""`jarvis say TEXT`, and the voice parts of `jarvis chat` (`--audio FILE`, `--voice`): the same voice engines as
the web UI (orchestrator/voice/).

The microphone and the loudspeaker are reached through programs that are already there: ffmpeg records (PulseAudio,
ALSA or AVFoundation, the first that opens), and the first player found plays (pw-play, paplay, aplay, afplay,
ffplay). A machine with neither says so and points to `--audio FILE` / `--out FILE`. What is heard only becomes
a message: confirmations are still asked on the keyboard.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import typer

from orchestrator.cli import fail, say, state
from orchestrator.core.child_env import child_environment

# ffmpeg input formats of a default microphone, tried in order.
MICROPHONES = (("pulse", "default"), ("alsa", "default")) if sys.platform != "darwin" else (("avfoundation", ":0"),)
PLAYERS = (("pw-play", []), ("paplay", []), ("aplay", ["-q"]), ("afplay", []),
           ("ffplay", ["-nodisp", "-autoexit", "-loglevel", "error"]))


def heard_from_file(settings: Any, path: str) -> str:
    """The words of a recorded question (a file), shown on stderr as heard; exits with the reason when it fails."""
    from orchestrator.voice import VoiceError, transcribe

    source = Path(path).expanduser()
    if not source.is_file():
        fail(f"{path}: no such file (--audio takes a recording: webm, ogg, wav, mp3, flac or m4a)")
    limit = settings.voice.max_audio_mb * 1024 * 1024
    if source.stat().st_size > limit:
        fail(f"{path} is larger than {settings.voice.max_audio_mb} MB (voice.max_audio_mb in the config)")
    try:
        heard = transcribe(settings, source.read_bytes())
    except VoiceError as exc:
        fail(str(exc))
    say(f"(heard, confidence {heard.confidence:.2f}) {heard.text}", err=True, dim=True)
    return heard.text


def find_microphone() -> tuple[str, str] | None:
    """The first ffmpeg input (format, device) that records; None on a machine without a microphone."""
    from orchestrator.voice.audio import ffmpeg_path

    ffmpeg = ffmpeg_path()
    for fmt, device in MICROPHONES:
        probe = subprocess.run([ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-f", fmt, "-i", device,
                                "-t", "0.2", "-f", "null", "-"], capture_output=True, timeout=15, check=False,
                               env=child_environment())
        if probe.returncode == 0:
            return fmt, device
    return None


def record_question(settings: Any, microphone: tuple[str, str]) -> bytes:
    """Record until Enter (or voice.max_audio_s), as WAV."""
    from orchestrator.voice.audio import ffmpeg_path

    limit = settings.voice.max_audio_s
    with tempfile.TemporaryDirectory(prefix="jarvis-mic-") as tmp:
        out = Path(tmp) / "question.wav"
        proc = subprocess.Popen([ffmpeg_path(), "-hide_banner", "-loglevel", "error", "-f", microphone[0], "-i",
                                 microphone[1], "-t", f"{limit:g}", "-ac", "1", "-ar", "16000", str(out)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=child_environment())
        say(f"Listening… press Enter when you have finished (at most {limit:g} s).", err=True, dim=True)
        try:
            input()
        except (EOFError, KeyboardInterrupt):
            pass
        try:
            proc.communicate(b"q", timeout=10)  # ffmpeg's own "quit": the WAV is closed properly
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return out.read_bytes() if out.exists() else b""


def heard_from_microphone(settings: Any, microphone: tuple[str, str]) -> str | None:
    from orchestrator.voice import VoiceError, transcribe

    try:
        heard = transcribe(settings, record_question(settings, microphone))
    except VoiceError as exc:
        say(f"Not understood: {exc}", err=True, fg=typer.colors.YELLOW)
        return None
    say(f"you (heard)> {heard.text}", err=True)
    return heard.text


def play(wav: bytes) -> str | None:
    """Play a WAV on the first player that works; None when it played, else why not."""
    tried = []
    for name, args in PLAYERS:
        exe = shutil.which(name)
        if not exe:
            continue
        with tempfile.NamedTemporaryFile(suffix=".wav", prefix="jarvis-say-") as f:
            f.write(wav)
            f.flush()
            proc = subprocess.run([exe, *args, f.name], capture_output=True, timeout=600, check=False,
                                  env=child_environment())
        said = proc.stderr.decode("utf-8", "replace")
        if proc.returncode == 0 and "fail" not in said.lower():  # ffplay exits 0 when it found no audio device
            return None
        lines = said.strip().splitlines()
        # The line about the sound device says more than the last one ("Failed to open file" from ffplay).
        reason = next((line for line in lines if "audio" in line.lower()), lines[-1] if lines else "failed")
        tried.append(f"{name}: {reason[:120]}")
    if not tried:
        return "no audio player found (pw-play, paplay, aplay, afplay or ffplay)"
    return "no player could play it (" + "; ".join(tried) + ")"


def say_aloud(settings: Any, text: str) -> None:
    """Speak an answer in `jarvis chat --voice`; a failure is a note, the answer is on the screen already."""
    from orchestrator.voice import VoiceError, speak

    if not text.strip():  # the turn ended on a confirmation or a tool step: nothing to say
        return
    try:
        problem = play(speak(settings, text))
    except VoiceError as exc:
        problem = str(exc)
    if problem:
        say(f"(not spoken: {problem})", err=True, dim=True)


def register(app: typer.Typer) -> None:
    @app.command("say")
    def say_text(  # not `say`: that is the CLI's printer, used below
        ctx: typer.Context,
        text: list[str] = typer.Argument(..., help="what to say"),
        voice: str = typer.Option(None, "--voice", help="an eSpeak NG voice, e.g. en-us+edward (default voice.voice)"),
        out: Path = typer.Option(None, "--out", "-o", help="write the WAV here instead of playing it"),
    ) -> None:
        """Say TEXT aloud with Jarvis's voice (or write it to a WAV file with --out)."""
        from ..voice import VoiceError, speak

        settings = state(ctx).settings
        try:
            wav = speak(settings, " ".join(text), voice)
        except VoiceError as exc:
            fail(str(exc))
        if out is not None:
            try:
                out.expanduser().write_bytes(wav)
            except OSError as exc:
                fail(f"could not write {out}: {exc.strerror or exc}")
            say(str(out))
            return
        problem = play(wav)
        if problem:
            fail(f"could not play the speech: {problem}. Write it to a file instead: jarvis say --out speech.wav TEXT")
