"""Voice in and out: `transcribe(audio) -> Transcript` and `speak(text) -> WAV bytes`, behind one interface so
the web UI, the CLI and later front ends (a phone, VR) share them, and a better engine is a config choice.

The engines are named in the config (`voice.stt`, `voice.tts`) and looked up in `engines.py`; both run offline
with nothing downloaded at run time: PocketSphinx's English model ships inside its wheel, eSpeak NG is a system
package. What browsers record (webm/opus, ogg, wav, mp3...) is decoded by ffmpeg (`audio.py`), with the size and
duration bounded before any recogniser sees it.
"""

from __future__ import annotations

from orchestrator.voice.base import SpeechToText, TextToSpeech, Transcript, VoiceError
from orchestrator.voice.engines import speak, speech_to_text, text_to_speech, transcribe

__all__ = ["SpeechToText", "TextToSpeech", "Transcript", "VoiceError", "speak", "speech_to_text", "text_to_speech",
           "transcribe"]
