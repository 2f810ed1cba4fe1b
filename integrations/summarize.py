"""Summaries of long texts within a model's budget: pieces packed into chunks, map-reduce over the chunks.

A document arrives as an iterator of pieces (a PDF page, a stretch of transcript), each with a label the
model can cite ("page 12", "[04:10]"). Pieces are packed into chunks of at most `chunk_tokens`; each chunk is
summarized on its own (map), and the partial summaries are merged in groups that again fit the budget until
one call can write the final answer (reduce). No call ever holds more than one chunk's worth of text, and
only the partial summaries are kept, so memory does not grow with the length of the document.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from .base import ToolError

log = logging.getLogger(__name__)

# (reply, model) -> the reply, or an exception saying why it must not be used: the caller's judgement of how the
# answer ended (orchestrator/llm/answer_end.checked_reply), passed in because integrations never import the
# orchestrator. A summary cut off (a stream closed mid-answer, a stop at the token limit) is not a summary.
ReplyCheck = Callable[[Any, Any], Any]


class CheckedModel:
    """A chat model whose every answer is judged by `check_reply` before a summary uses it."""

    def __init__(self, model: BaseChatModel, check_reply: ReplyCheck):
        self.model = model
        self.check_reply = check_reply

    def invoke(self, messages: Any, config: Any = None, **kwargs: Any) -> Any:
        reply = self.model.invoke(messages, config=config, **kwargs)
        try:
            return self.check_reply(reply, self.model)
        except ToolError:
            raise
        except Exception as exc:  # noqa: BLE001 - the check's own sentence, as the tool's answer
            raise ToolError(str(exc)) from None


ChatModel = BaseChatModel | CheckedModel
ChatModelSource = ChatModel | Callable[[], ChatModel]


def checked_model(source: ChatModelSource, check_reply: ReplyCheck) -> Callable[[], CheckedModel]:
    """`source` (a model, or a factory called on first use as before) with its answers judged by `check_reply`:
    what the orchestrator hands the summary tools (PDF, YouTube, the document index)."""
    def build() -> CheckedModel:
        model = source() if callable(source) and not isinstance(source, (BaseChatModel, CheckedModel)) else source
        return model if isinstance(model, CheckedModel) else CheckedModel(model, check_reply)

    return build

# Room left in each call for the instructions around the text.
PROMPT_OVERHEAD_TOKENS = 300


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate that errs high: ~4 ASCII characters per token, 1 token per other character.

    The real tokenizer is the server's (Jan, Ollama...), unknown here; over-estimating keeps calls in budget."""
    if not text:
        return 0
    ascii_chars = sum(1 for c in text if c < "\x80")
    return ascii_chars // 4 + (len(text) - ascii_chars) + 1


class ModelSource:
    """A chat model given directly or built on first use (so building tools never starts a client)."""

    def __init__(self, source: ChatModelSource | None):
        self._source = source
        self._model: ChatModel | None = None

    def get(self) -> ChatModel:
        if self._model is None:
            if self._source is None:
                raise ToolError("No chat model is configured for summaries: set models.primary in the config.")
            self._model = self._source if isinstance(self._source, (BaseChatModel, CheckedModel)) else self._source()
        return self._model


def ask_model(model: ChatModel, system: str, user: str) -> str:
    try:
        reply = model.invoke([SystemMessage(content=system), HumanMessage(content=user)])
    except ToolError:
        raise
    except Exception as exc:  # noqa: BLE001 - the endpoint failed; say so in one sentence
        raise ToolError(
            f"The model that writes summaries failed ({type(exc).__name__}: {str(exc)[:200]}); check that the model "
            "server is running and try again."
        ) from None
    text = reply.text if hasattr(reply, "text") else str(reply.content)
    return (text or "").strip()


@dataclass
class Piece:
    text: str
    label: str  # how the model cites it: "page 3", "[01:20]"
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Chunk:
    pieces: list[Piece]

    @property
    def text(self) -> str:
        return "\n\n".join(f"<<{p.label}>>\n{p.text}" for p in self.pieces)

    @property
    def first(self) -> Piece:
        return self.pieces[0]

    @property
    def last(self) -> Piece:
        return self.pieces[-1]


def _split_text(text: str, budget: int) -> list[str]:
    """Cut one oversize text at paragraph, line or word boundaries into parts of at most `budget` tokens."""
    parts: list[str] = []
    current: list[str] = []
    used = 0
    for unit in re.split(r"(?<=\n)|(?<= )", text):
        cost = estimate_tokens(unit)
        if cost > budget:  # a single enormous "word": cut it by characters
            for i in range(0, len(unit), budget):
                parts.append(unit[i:i + budget])
            continue
        if used + cost > budget and current:
            parts.append("".join(current))
            current, used = [], 0
        current.append(unit)
        used += cost
    if current:
        parts.append("".join(current))
    return [p for p in parts if p.strip()]


def pack(pieces: Iterable[Piece], budget_tokens: int) -> Iterator[Chunk]:
    """Group consecutive pieces into chunks of at most budget_tokens (an oversize piece is split)."""
    current: list[Piece] = []
    used = 0
    for piece in pieces:
        if not piece.text.strip():
            continue
        cost = estimate_tokens(piece.text) + 4
        if cost > budget_tokens:
            if current:
                yield Chunk(current)
                current, used = [], 0
            for part in _split_text(piece.text, budget_tokens - 4):
                yield Chunk([Piece(part, piece.label, piece.meta)])
            continue
        if used + cost > budget_tokens and current:
            yield Chunk(current)
            current, used = [], 0
        current.append(piece)
        used += cost
    if current:
        yield Chunk(current)


@dataclass
class Partial:
    text: str
    first: Piece
    last: Piece


@dataclass
class SummaryPrompts:
    """What the model is told at each stage; `what` names the document ("the PDF report.pdf")."""

    system: str
    single: Callable[[Chunk], str]  # the whole document fits one call: write the final answer at once
    map: Callable[[Chunk], str]  # notes on one chunk
    merge: Callable[[list[Partial]], str]  # merge notes into shorter notes
    final: Callable[[list[Partial]], str]  # the final answer from notes


@dataclass
class SummaryResult:
    text: str
    partials: list[Partial]  # the map stage's notes (empty when the document fitted one call)
    chunks: int
    truncated: bool  # stopped at max_chunks
    last_piece: Piece | None


def _peek(it: Iterator[Chunk]) -> tuple[Chunk | None, Chunk | None, Iterator[Chunk]]:
    first = next(it, None)
    second = next(it, None) if first is not None else None
    return first, second, it


def map_reduce(
    model: ChatModel,
    chunks: Iterable[Chunk],
    prompts: SummaryPrompts,
    *,
    chunk_tokens: int,
    max_chunks: int,
    progress: Callable[[int], None] | None = None,
) -> SummaryResult:
    first, second, rest = _peek(iter(chunks))
    if first is None:
        return SummaryResult("", [], 0, False, None)
    if second is None:
        return SummaryResult(ask_model(model, prompts.system, prompts.single(first)), [], 1, False, first.last)

    # Each partial is kept short enough that at least two of them always fit one merge call.
    note_budget = max(100, (chunk_tokens - PROMPT_OVERHEAD_TOKENS) // 3)
    partials: list[Partial] = []
    truncated = False
    last_piece: Piece | None = None
    count = 0
    for chunk in _chain(first, second, rest):
        if count >= max_chunks:
            truncated = True
            break
        note = _clip(ask_model(model, prompts.system, prompts.map(chunk)), note_budget)
        partials.append(Partial(note, chunk.first, chunk.last))
        last_piece = chunk.last
        count += 1
        if progress:
            progress(count)

    notes = partials
    while True:
        total = sum(estimate_tokens(p.text) + 8 for p in notes)
        if total <= chunk_tokens - PROMPT_OVERHEAD_TOKENS or len(notes) == 1:
            return SummaryResult(ask_model(model, prompts.system, prompts.final(notes)), partials, count, truncated,
                                 last_piece)
        notes = [_merge(model, prompts, group, note_budget) for group in _groups(notes, chunk_tokens)]


def _chain(*parts: Any) -> Iterator[Chunk]:
    for p in parts[:-1]:
        yield p
    yield from parts[-1]


def _groups(notes: list[Partial], chunk_tokens: int) -> list[list[Partial]]:
    budget = chunk_tokens - PROMPT_OVERHEAD_TOKENS
    groups: list[list[Partial]] = [[]]
    used = 0
    for note in notes:
        cost = estimate_tokens(note.text) + 8
        if used + cost > budget and groups[-1]:
            groups.append([])
            used = 0
        groups[-1].append(note)
        used += cost
    # Notes are capped at a third of the budget, so the first group always holds two or more: every round
    # of merging shortens the list, and the loop ends.
    return groups


def _merge(model: ChatModel, prompts: SummaryPrompts, group: list[Partial], note_budget: int) -> Partial:
    if len(group) == 1:
        return group[0]
    text = _clip(ask_model(model, prompts.system, prompts.merge(group)), note_budget)
    return Partial(text, group[0].first, group[-1].last)


def _clip(text: str, budget: int) -> str:
    if estimate_tokens(text) <= budget:
        return text
    parts = _split_text(text, budget)
    return (parts[0] if parts else text[: budget * 4]).rstrip() + " [...]"


STYLES: dict[str, str] = {
    "concise": "a concise summary of one short paragraph (at most 120 words)",
    "key_points": "the key points as a short bulleted list (at most 10 bullets)",
    "detailed": "a detailed summary with a few paragraphs covering every main section",
    "bullets": "a bulleted list of the main points",
}


def style_instruction(style: str) -> str:
    return STYLES.get((style or "concise").strip().lower(), f"a summary in this style: {style}")
