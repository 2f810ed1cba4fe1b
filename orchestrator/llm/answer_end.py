"""How a model's answer ended, for every caller of a chat model: complete, cut off, or stopped at its token limit.

An OpenAI-compatible server ends every answer with a `finish_reason`. A stream that ends without one was cut (the
connection closed mid-answer): what arrived is not the model's answer and a call in it may be half written.
`finish_reason: "length"` means the model hit its token limit: the text is not complete. langchain-openai passes
both through silently, so an answer cut off would be saved, parsed or acted on as if whole. The planner
(chat/planner.py) shows a cut answer as cut; every other caller (jorb policies, the switchboard, the history
summary, memory extraction, phone tasks) calls `checked_reply`, which refuses both with one sentence saying what
to do.

Only answers of the OpenAI-compatible client are judged (their metadata says `model_provider: "openai"`); other
chat models (in-process stand-ins) say nothing about how they ended.
"""

from __future__ import annotations

from typing import Any, Literal

from orchestrator.core.errors import ModelEndpointError

Ending = Literal["complete", "cut", "length"]


class AnswerAtTokenLimit(ModelEndpointError):
    """An answer stopped at the model's token limit: the endpoint works, the limit is too low for this answer. A
    caller that can go on without the answer (JARB gives up on the tool and tells the planner) catches this one."""


def ending(message: Any) -> Ending:
    """How `message` (an AIMessage or a merged AIMessageChunk) ended."""
    meta = getattr(message, "response_metadata", None) or {}
    if meta.get("model_provider") != "openai":
        return "complete"
    # streamed: the key is there only when a chunk carried a finish_reason; not streamed, it is always there
    if "finish_reason" not in meta:
        return "cut"
    return "length" if meta.get("finish_reason") == "length" else "complete"


def model_of(llm: Any) -> Any:
    """The chat model under tool bindings and configured wrappers (RunnableBinding.bound)."""
    for _ in range(5):
        inner = getattr(llm, "bound", None)
        if inner is None:
            break
        llm = inner
    return llm


def where(llm: Any) -> tuple[str, str, int | None]:
    """(base URL, role, max_tokens) of a model made by llm.client.make_chat_model, for messages."""
    model = model_of(llm)
    role = str((getattr(model, "metadata", None) or {}).get("jarvis_role") or "primary")
    return str(getattr(model, "openai_api_base", None) or "the model endpoint"), role, getattr(model, "max_tokens", None)


def limit_text(role: str, max_tokens: int | None) -> str:
    return f"models.{role}.max_tokens = {max_tokens}" if max_tokens else "the model server's own limit"


def cut_message(base_url: str) -> str:
    return (f"The answer from the model at {base_url} was cut off: the connection closed before the model said it "
            "was done, so nothing of it was kept. Ask again; if it keeps happening, look at the model server's log.")


def checked_reply(reply: Any, llm: Any, what: str) -> Any:
    """`reply` when the model finished it; ModelEndpointError when it was cut off or stopped at its token limit
    (`what` names the answer in the message: "the summary of the earlier conversation", "the jorb's next step")."""
    end = ending(reply)
    if end == "complete":
        return reply
    base_url, role, max_tokens = where(llm)
    if end == "cut":
        raise ModelEndpointError(
            f"The model at {base_url} stopped in the middle of {what}: the connection closed before the model said "
            "it was done, so none of it was used. Try again; if it keeps happening, look at the model server's log.")
    raise AnswerAtTokenLimit(
        f"The model at {base_url} was cut off at its token limit ({limit_text(role, max_tokens)}) while writing "
        f"{what}, so the unfinished answer was not used. Raise the limit, or try again.")
