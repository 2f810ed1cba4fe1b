"""Real PDF files for the tests, written with fpdf2: plain, long, encrypted, scanned-like, damaged, not a PDF.

Pages are written line by line with `text()` (fpdf2's `multi_cell` is ~70x slower), so a 500-page file takes
well under a second. Each page says which page it is, and a few pages carry a fact a question can find.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LINE = "The committee reviewed the quarterly figures and discussed the plan for the coming months."

# Facts placed on given pages of the long documents: (page, sentence).
FACTS = {
    7: "The lighthouse keeper Marguerite counted forty-two herons on the northern jetty.",
    333: "The secret ingredient of the harbour soup is smoked paprika from Extremadura.",
}


def write_pdf(path: Path, pages: int, lines_per_page: int = 8, *, title: str | None = None,
              facts: dict[int, str] | None = None, owner_password: str | None = None,
              user_password: str | None = None) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_compression(True)
    if title:
        pdf.set_title(title)
    pdf.set_font("Helvetica", size=10)
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.text(10, 12, f"Page {n} of the report")
        for j in range(lines_per_page):
            pdf.text(10, 22 + j * 6, f"{n}.{j} {LINE}")
        fact = (facts or {}).get(n)
        if fact:
            pdf.text(10, 22 + lines_per_page * 6, fact)
    if owner_password or user_password:
        from fpdf.enums import EncryptionMethod

        pdf.set_encryption(owner_password=owner_password or user_password, user_password=user_password or "",
                           encryption_method=EncryptionMethod.AES_256)
    pdf.output(str(path))
    return path


def write_image_only_pdf(path: Path, pages: int = 2) -> Path:
    """Pages with a drawn picture and no text at all: what a scan without OCR looks like to a text extractor."""
    from fpdf import FPDF

    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.set_fill_color(90, 90, 90)
        for i in range(20):
            pdf.rect(10 + i * 8, 20 + (i % 5) * 10, 6, 40, style="F")
    pdf.output(str(path))
    return path


@dataclass
class SamplePdfs:
    folder: Path
    one: Path
    fifty: Path
    five_hundred: Path
    encrypted: Path  # user password "s3cret"
    owner_only: Path  # opens without a password
    scanned: Path
    truncated: Path
    garbage: Path
    not_pdf: Path
    empty: Path

    PASSWORD = "s3cret"


def make_samples(folder: Path) -> SamplePdfs:
    folder.mkdir(parents=True, exist_ok=True)
    one = write_pdf(folder / "one.pdf", 1, title="One page memo",
                    facts={1: "The meeting with Bob is on Tuesday at 10:00 in room 4."})
    fifty = write_pdf(folder / "fifty.pdf", 50, facts=FACTS)
    five_hundred = write_pdf(folder / "five_hundred.pdf", 500, facts=FACTS)
    encrypted = write_pdf(folder / "encrypted.pdf", 3, user_password=SamplePdfs.PASSWORD, owner_password="owner-pw")
    owner_only = write_pdf(folder / "owner_only.pdf", 2, owner_password="owner-pw")
    scanned = write_image_only_pdf(folder / "scanned.pdf")
    data = fifty.read_bytes()
    truncated = folder / "truncated.pdf"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = folder / "garbage.pdf"
    garbage.write_bytes(b"%PDF-1.7\n" + bytes((i * 37 + 11) % 256 for i in range(20_000)))
    not_pdf = folder / "notes.pdf"
    not_pdf.write_text("These are plain notes that someone saved with a .pdf name.\n", encoding="utf-8")
    empty = folder / "empty.pdf"
    empty.write_bytes(b"")
    return SamplePdfs(folder, one, fifty, five_hundred, encrypted, owner_only, scanned, truncated, garbage, not_pdf, empty)
