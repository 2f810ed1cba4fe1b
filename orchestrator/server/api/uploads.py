"""POST /api/uploads?filename=NAME with the file as the raw body: a dropped PDF or text file, stored under the
data dir; the answer's `upload_id` goes into a message's attachments."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request

from orchestrator.chat.uploads import UploadError, UploadWriter, max_bytes
from . import AppContext, app_context

router = APIRouter()


@router.post("/uploads")
async def upload(request: Request, filename: str, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes(ctx.settings):
        raise HTTPException(413, f"{filename} is larger than {ctx.settings.server.max_upload_mb} MB "
                                 "(server.max_upload_mb in the config)")
    try:
        writer = UploadWriter(ctx.settings, filename)
        try:
            async for chunk in request.stream():
                writer.write(chunk)
        except UploadError:
            raise
        except Exception:
            writer.abort()
            raise
        stored = writer.finish()
    except UploadError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    return stored.as_dict()


ROUTER = router
