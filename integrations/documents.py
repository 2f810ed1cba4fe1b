"""What the reading tools (PDF, YouTube) hand to whoever keeps documents, without knowing who that is.

`integrations` may not import `orchestrator`; the document index lives there. So the reading tools take an
optional `DocumentSink` at build time: after a whole document was read they offer it (`wants` first, so an
unchanged document is not even collected), and `pdf_qa` asks it for passages when it already holds the file.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, Field


class Segment(BaseModel):
    text: str
    page: int | None = None  # PDFs: 1-based page
    start_s: float | None = None  # transcripts: seconds from the start


class ReadDocument(BaseModel):
    kind: Literal["pdf", "youtube", "text"]
    source: str  # absolute path or canonical URL
    title: str | None = None
    content_hash: str
    source_tool: str
    segments: list[Segment] = Field(default_factory=list)


class DocumentSink(Protocol):
    def wants(self, kind: str, source: str, content_hash: str) -> bool:
        """False when this exact content is already kept (or auto-indexing is off)."""
        ...

    def add(self, doc: ReadDocument) -> None: ...

    def passages(self, source: str, content_hash: str, question: str, k: int) -> list[Segment] | None:
        """The k passages of that document best matching the question, or None when it is not kept."""
        ...


def offer(sink: DocumentSink | None, doc: ReadDocument) -> None:
    """Hand a document over; the sink's failure never fails the tool that read it."""
    if sink is None:
        return
    try:
        sink.add(doc)
    except Exception:  # noqa: BLE001
        import logging

        logging.getLogger(__name__).warning("could not keep %s in the document index", doc.source, exc_info=True)
