"""Speech for the web UI (and any client with the token):

    GET  /api/voice                   the voice settings and whether the engines are installed
    POST /api/transcribe?language=L   a recording as the raw body (webm/opus, ogg, wav, mp3...) -> {text, confidence,
                                      duration_s, language, engine}
    POST /api/speak                   {"text", "voice"?} -> audio/wav

The recording is bounded while it streams in (voice.max_audio_mb; the general request limit does not apply, as for
uploads) and in duration when decoded (voice.max_audio_s). Errors answer with the status `VoiceError` carries and a
message saying what to do. A transcript is only text for the message box: it never answers a confirmation.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel, Field

from orchestrator.voice import VoiceError, speak, speech_to_text, text_to_speech, transcribe
from orchestrator.voice.audio import ffmpeg_path
from orchestrator.voice.engines import MB
from orchestrator.server.api import AppContext, app_context

router = APIRouter()


class SpeakBody(BaseModel):
    text: str
    voice: str | None = Field(None, max_length=100)


@router.get("/voice")
def voice_settings(ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    cfg = ctx.settings.voice
    problems = []
    if cfg.enabled:
        for check in (lambda: speech_to_text(cfg.stt, cfg.whisper_model), lambda: text_to_speech(cfg.tts), ffmpeg_path):
            try:
                check()
            except VoiceError as exc:
                problems.append(str(exc))
    return {"enabled": cfg.enabled, "available": cfg.enabled and not problems, "problems": problems,
            "stt": cfg.stt, "tts": cfg.tts, "language": cfg.language, "voice": cfg.voice,
            "send_transcript": cfg.send_transcript, "max_audio_s": cfg.max_audio_s, "max_audio_mb": cfg.max_audio_mb}


@router.post("/transcribe")
async def transcribe_recording(request: Request, language: str | None = None,
                               ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    limit = ctx.settings.voice.max_audio_mb * MB
    too_large = HTTPException(413, f"The recording is larger than {ctx.settings.voice.max_audio_mb} MB "
                                   "(voice.max_audio_mb in the config): ask in shorter pieces.")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > limit:
            raise too_large
    try:
        heard = await asyncio.to_thread(transcribe, ctx.settings, bytes(data), language)
    except VoiceError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    return heard.as_dict()


@router.post("/speak")
async def speak_text(body: SpeakBody, ctx: AppContext = Depends(app_context)) -> Response:
    try:
        wav = await asyncio.to_thread(speak, ctx.settings, body.text, body.voice)
    except VoiceError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    return Response(content=wav, media_type="audio/wav", headers={"Cache-Control": "no-store"})


ROUTER = router
