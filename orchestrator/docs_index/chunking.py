"""Cutting a read document into index chunks: never across a PDF page, transcripts by time, text by paragraph."""

from __future__ import annotations

import re
from dataclasses import dataclass

from integrations.documents import ReadDocument, Segment


@dataclass
class ChunkText:
    position: int
    text: str
    page: int | None = None
    start_s: float | None = None


def _split(text: str, limit: int) -> list[str]:
    """Paragraphs, then sentences, then words, packed into pieces of at most `limit` characters."""
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    units: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        if len(para) <= limit:
            units.append(para)
            continue
        for sentence in re.split(r"(?<=[.!?])\s+", para):
            while len(sentence) > limit:  # a run-on "sentence" (tables, OCR): cut at a word boundary
                cut = sentence.rfind(" ", 0, limit)
                cut = cut if cut > limit // 2 else limit
                units.append(sentence[:cut].strip())
                sentence = sentence[cut:].strip()
            if sentence:
                units.append(sentence)
    pieces: list[str] = []
    current = ""
    for unit in units:
        if current and len(current) + 1 + len(unit) > limit:
            pieces.append(current)
            current = unit
        else:
            current = f"{current} {unit}".strip() if current else unit
    if current:
        pieces.append(current)
    return pieces


def chunk_document(doc: ReadDocument, limit: int) -> list[ChunkText]:
    chunks: list[ChunkText] = []
    if doc.kind == "youtube":
        current: list[Segment] = []
        size = 0
        groups: list[list[Segment]] = []
        for seg in doc.segments:
            if current and size + len(seg.text) > limit:
                groups.append(current)
                current, size = [], 0
            current.append(seg)
            size += len(seg.text) + 1
        if current:
            groups.append(current)
        for group in groups:
            for piece in _split(" ".join(s.text for s in group), limit):
                chunks.append(ChunkText(0, piece, start_s=group[0].start_s))
    else:  # PDFs page by page (a chunk never spans two pages), text by paragraph
        for seg in doc.segments:
            for piece in _split(seg.text, limit):
                chunks.append(ChunkText(0, piece, page=seg.page))
    for i, c in enumerate(chunks):
        c.position = i
    return chunks
