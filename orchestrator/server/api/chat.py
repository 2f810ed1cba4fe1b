"""Threads, messages, confirmations: the Chat view's API.

  GET  /api/threads                        the thread list, most recent first
  POST /api/threads                        a new thread id (nothing is stored until the first message)
  GET  /api/threads/{id}                   messages (answers as sanitized HTML), attachments, pending confirmations
  POST /api/threads/{id}/messages          {"text", "attachments"} -> the turn's events as SSE
  GET  /api/threads/{id}/events            attach to the running turn (after a reload) -> SSE
  GET  /api/threads/{id}/pending           the confirmations it waits for, read from the checkpoint
  POST /api/threads/{id}/resume            {"answers": {interrupt_id: {"answer": approve|edit|deny, "args",
                                           "reason", "ref"}}} (or "decisions": resume values) -> SSE
  POST /api/threads/{id}/retry             continue a turn that stopped on an error -> SSE
  POST /api/threads/{id}/stop              stop the running turn (its own stream then says `stopped`)
  GET  /api/pending                        every confirmation waiting, across threads

A jorb's own thread (`jorb:<id>`) is not a conversation: every route naming a thread refuses it with 400 (the Jorbs view
and /api/jorbs/{id} show and answer it).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path
from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field, model_validator

from orchestrator.approvals.store import AlreadyAnswered
from orchestrator.chat.answering import Incomplete, NotPending
from orchestrator.chat.live_turns import TurnBusy
from orchestrator.server.markdown import render_markdown
from orchestrator.chat.state import tainted
from orchestrator.core.ids import conversation_of
from orchestrator.storage.threads import ThreadIndex, message_view, pending_confirmations
from orchestrator.chat.turns import thread_config, user_input
from orchestrator.tools.answers import with_ref
from orchestrator.chat.uploads import attached_words, find_upload, with_attachments
from . import AppContext, View, app_context
from ._answers import ResumeIn, resume_values_for
from ._sse import sse_response

router = APIRouter()


def chat_thread_id(
    thread_id: Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$", description="a thread id")],
) -> str:
    """A chat thread's id. A jorb's own thread (`jorb:<id>`) is refused: a chat turn written there, or a delete,
    would overwrite or erase the jorb's checkpoints, and its confirmations are answered through the jorb."""
    jorb_id = conversation_of(thread_id).jorb_id
    if jorb_id is not None:
        raise HTTPException(400, f"{thread_id} is the thread of jorb {jorb_id}, not a conversation: open the jorb "
                                 f"in the Jorbs view (or use /api/jorbs/{jorb_id}).")
    return thread_id


ThreadId = Annotated[str, Depends(chat_thread_id)]
_YT_RE = re.compile(r"(?:youtube\.com|youtu\.be|youtube-nocookie\.com)", re.I)
TOOL_CONTENT_LIMIT = 4000


class AttachmentIn(BaseModel):
    """An uploaded file (`upload_id` from POST /api/uploads) or a URL (`kind` url/youtube + `ref`)."""

    upload_id: str | None = None
    kind: Literal["url", "youtube"] | None = None
    ref: str | None = Field(None, max_length=2000)

    @model_validator(mode="after")
    def _one_of(self) -> "AttachmentIn":
        if bool(self.upload_id) == bool(self.ref):
            raise ValueError("give either upload_id (a dropped file) or ref (a URL)")
        if self.ref and not self.ref.startswith(("http://", "https://")):
            raise ValueError("a URL attachment must start with http:// or https://")
        return self


class MessageIn(BaseModel):
    text: str = Field("", max_length=100_000)
    attachments: list[AttachmentIn] = Field(default_factory=list, max_length=20)


def _snapshot(ctx: AppContext, thread_id: str) -> Any:
    return ctx.graph.get_state(thread_config(thread_id))


def _values(snapshot: Any) -> dict[str, Any]:
    return snapshot.values if isinstance(snapshot.values, dict) else {}


def _message(m: Any) -> dict[str, Any]:
    view = message_view(m)
    if isinstance(m, AIMessage):
        view["html"] = render_markdown(view["content"])
    elif view["type"] == "tool" and len(view["content"]) > TOOL_CONTENT_LIMIT:
        view["content"] = view["content"][:TOOL_CONTENT_LIMIT] + f"\n[... {len(view['content']) - TOOL_CONTENT_LIMIT} more characters]"
    return view


def _attachment_view(a: Any) -> dict[str, Any]:
    data = a.model_dump() if hasattr(a, "model_dump") else dict(a)
    return {"kind": data.get("kind"), "name": data.get("name") or data.get("ref"), "ref": data.get("ref")}


def _busy(thread_id: str, busy: TurnBusy | None = None) -> HTTPException:
    where = f" in another worker ({busy.elsewhere})" if busy is not None and busy.elsewhere else ""
    return HTTPException(409, f"Jarvis is still working on thread {thread_id}{where}; wait for that turn to finish.")


@router.get("/threads")
def list_threads(limit: int = 100, q: str | None = None, ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
    """Most recent first. `q`: threads whose title, or what was said in them, contains it (any case)."""
    running = set(ctx.turns.running_ids())
    index = ThreadIndex(ctx.settings)
    limit = max(1, min(limit, 500))
    needle = (q or "").strip()[:200].lower()
    if not needle:
        rows = index.list(limit=limit, kind="chat")
    else:
        by_title = index.list(limit=limit, kind="chat", title=needle)
        seen = {r.thread_id for r in by_title}
        rows = by_title + [r for r in index.list(limit=limit, kind="chat")
                           if r.thread_id not in seen and _said_in(ctx, index, r.thread_id, needle)]
    return [{**r.as_dict(), "running": r.thread_id in running} for r in rows[:limit]]


def _said_in(ctx: AppContext, index: ThreadIndex, thread_id: str, needle: str) -> bool:
    messages = index.archived(thread_id) + list(_values(_snapshot(ctx, thread_id)).get("messages", []))
    return any(needle in (m.content if isinstance(m.content, str) else str(m.content)).lower() for m in messages)


class RenameIn(BaseModel):
    title: str = Field(min_length=1, max_length=200)


@router.post("/threads/{thread_id}/trust")
def trust_thread(thread_id: ThreadId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """The user has checked what the thread read: its automatic effects stop asking first (until it reads more).
    The same as `jarvis threads trust`."""
    if ctx.turns.running(thread_id) is not None:
        raise _busy(thread_id)
    snapshot = _snapshot(ctx, thread_id)
    values = _values(snapshot)
    if not values:
        raise HTTPException(404, f"There is no thread {thread_id}.")
    if snapshot.interrupts:
        raise HTTPException(409, "Answer the pending confirmation first.")
    untrusted = int(values.get("untrusted_turn", -1))
    if tainted(untrusted, int(values.get("trusted_after_turn", -1))):
        ctx.graph.update_state(thread_config(thread_id), {"trusted_after_turn": untrusted}, as_node="respond")
    return {"thread_id": thread_id, "tainted": False}


@router.patch("/threads/{thread_id}")
def rename_thread(thread_id: ThreadId, body: RenameIn, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    info = ThreadIndex(ctx.settings).rename(thread_id, body.title.strip())
    if info is None:
        raise HTTPException(404, f"There is no thread {thread_id}.")
    return info.as_dict()


@router.delete("/threads/{thread_id}")
def delete_thread(thread_id: ThreadId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """Forget a conversation: its checkpoints, its archived messages and its row (the effects ledger, a record
    of what was done, is kept). Refused while a turn runs on it."""
    if ctx.turns.running(thread_id) is not None:
        raise _busy(thread_id)
    index = ThreadIndex(ctx.settings)
    if index.get(thread_id) is None and not _values(_snapshot(ctx, thread_id)).get("messages"):
        raise HTTPException(404, f"There is no thread {thread_id}.")
    ctx.graph.checkpointer.delete_thread(thread_id)
    index.delete(thread_id)
    return {"deleted": thread_id}


@router.post("/threads")
def new_thread() -> dict[str, str]:
    return {"thread_id": f"web-{secrets.token_hex(6)}"}


@router.get("/pending")
def all_pending(ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
    return ctx.app.pending()


@router.get("/threads/{thread_id}")
def get_thread(thread_id: ThreadId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    info = ThreadIndex(ctx.settings).get(thread_id)
    snapshot = _snapshot(ctx, thread_id)
    values = _values(snapshot)
    messages = ThreadIndex(ctx.settings).archived(thread_id) + list(values.get("messages", []))
    if info is None and not messages:
        raise HTTPException(404, f"There is no thread {thread_id}.")
    running = ctx.turns.running(thread_id) is not None
    pending = [] if running else _shown(ctx, thread_id)
    return {
        "thread_id": thread_id,
        "title": info.title if info else "",
        "status": info.status if info else "idle",
        # what the chat view compares with the list's to see a turn it did not start (a phone's answer, a reminder)
        "updated_at": info.updated_at.isoformat() if info else None,
        "messages": [_message(m) for m in messages],
        "attachments": [_attachment_view(a) for a in values.get("attachments", [])],
        "pending": pending,
        # confirmations.notify: where each was answered (the UI, a phone, the CLI), newest first.
        "answered": ctx.app.thread_answers.store.answers_for_thread(thread_id),
        "running": running,
        # The last turn stopped between steps (an error, or the process died): it can be continued.
        "stalled": bool(snapshot.next) and not pending and not running,
        # It read content from outside (a file, a page, an email): automatic effects ask first until trusted.
        "tainted": tainted(int(values.get("untrusted_turn", -1)), int(values.get("trusted_after_turn", -1))),
    }


@router.get("/threads/{thread_id}/pending")
def get_pending(thread_id: ThreadId, ctx: AppContext = Depends(app_context)) -> list[dict[str, Any]]:
    return _shown(ctx, thread_id)


def _shown(ctx: AppContext, thread_id: str) -> list[dict[str, Any]]:
    """The thread's confirmations as the UI shows them: each with its ref (what an answer names) and where it
    was sent. The UI looking at them is recorded: the notifier leaves watched confirmations alone."""
    pending = pending_confirmations(ctx.graph, thread_id)
    store = ctx.app.thread_answers.store
    if pending:
        store.ui_viewed(thread_id)
    for item in pending:
        item["sent"] = store.sent_for(with_ref(item)["ref"])
    return pending


def _resolve_attachments(ctx: AppContext, items: list[AttachmentIn]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        if item.upload_id:
            stored = find_upload(ctx.settings, item.upload_id)
            if stored is None:
                raise HTTPException(404, f"Upload {item.upload_id} is unknown or was removed; drop the file again.")
            out.append(stored.attachment())
        else:
            kind = item.kind or ("youtube" if _YT_RE.search(item.ref or "") else "url")
            out.append({"kind": kind, "ref": item.ref})
    return out


@router.post("/threads/{thread_id}/messages")
async def send_message(body: MessageIn, thread_id: ThreadId, ctx: AppContext = Depends(app_context)):
    text = body.text.strip()
    if not text and not body.attachments:
        raise HTTPException(400, "The message is empty: write something or attach a file.")
    if ctx.turns.running(thread_id) is not None:
        raise _busy(thread_id)
    snapshot = await asyncio.to_thread(_snapshot, ctx, thread_id)
    if snapshot.interrupts:
        raise HTTPException(409, "This conversation is waiting for your confirmation: answer it (Approve, Edit or "
                                 "Deny) before sending another message.")
    new = _resolve_attachments(ctx, body.attachments)
    attachments = with_attachments(_values(snapshot).get("attachments", []), new)
    if not text:  # a file's name is not the user's words (its maker chose it): the planner is shown it as data
        text = attached_words(new)
    try:
        turn = ctx.turns.start(thread_id, user_input(text, attachments))
    except TurnBusy as busy:
        raise _busy(thread_id, busy) from None
    return sse_response(thread_id, turn.listen())


@router.get("/threads/{thread_id}/events")
async def attach(thread_id: ThreadId, since: int = 0, ctx: AppContext = Depends(app_context)):
    turn = ctx.turns.running(thread_id)

    async def nothing():
        return
        yield  # pragma: no cover

    return sse_response(thread_id, turn.listen(max(0, since)) if turn is not None else nothing())


@router.post("/threads/{thread_id}/resume")
async def resume(body: ResumeIn, thread_id: ThreadId, ctx: AppContext = Depends(app_context)):
    """The dialog's answers, applied the one way every surface's are (chat/answering.py)."""
    try:
        turn = await asyncio.to_thread(ctx.app.thread_answers.apply, thread_id, body.ids(),
                                       lambda pending: resume_values_for(body, pending), "the web UI", every=True)
    except TurnBusy as busy:
        raise _busy(thread_id, busy) from None
    except (AlreadyAnswered, NotPending) as exc:
        raise HTTPException(409, str(exc)) from None
    except Incomplete as exc:
        raise HTTPException(400, str(exc)) from None
    return sse_response(thread_id, turn.listen())


@router.post("/threads/{thread_id}/retry")
async def retry(thread_id: ThreadId, ctx: AppContext = Depends(app_context)):
    if ctx.turns.running(thread_id) is not None:
        raise _busy(thread_id)
    snapshot = await asyncio.to_thread(_snapshot, ctx, thread_id)
    if snapshot.interrupts:
        raise HTTPException(409, "This turn waits for a confirmation, not a retry: answer it.")
    if not snapshot.next:
        raise HTTPException(409, "The last turn finished; there is nothing to retry. Send a new message instead.")
    try:
        turn = ctx.turns.start(thread_id, None)
    except TurnBusy as busy:
        raise _busy(thread_id, busy) from None
    return sse_response(thread_id, turn.listen())


@router.post("/threads/{thread_id}/stop")
def stop_turn(thread_id: ThreadId, ctx: AppContext = Depends(app_context)) -> dict[str, Any]:
    """Stop the turn running on the thread: its model call ends at the next token, nothing new starts, and the
    turn's own stream says `stopped`."""
    if not ctx.turns.stop(thread_id):
        raise HTTPException(409, "No turn is running on this conversation in this Jarvis; there is nothing to stop.")
    return {"stopping": True}


VIEW = View(name="chat", title="Chat", router=router, order=0)
