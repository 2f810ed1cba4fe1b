"""PDF tools on real files: made here with fpdf2, and the corpus of real-world PDFs (many producers, defects)."""

from __future__ import annotations

import itertools
import os
import re
import resource
import threading
import time
import types
import zlib
from pathlib import Path

import pytest

from integrations import pdf_reader
from integrations.base import ToolError
from integrations.pdf_tools import build_pdf_tools
from integrations.summarize import estimate_tokens
from tests.conftest import CORPUS
from tests.fakes.llm_server import last_message_text
from tests.fakes.pdfs import FACTS, SamplePdfs

PDF_CORPUS = CORPUS / "pdf"

# Passwords from the corpus README: file name -> user password (to read it).
CORPUS_PASSWORDS = {
    "r2-user-password.pdf": "asdfzxcv", "r3-user-password.pdf": "asdfzxcv", "r4-user-password.pdf": "asdfzxcv",
    "r4-aes-user-password.pdf": "asdfzxcv", "r5-user-password.pdf": "asdfzxcv", "r6-user-password.pdf": "asdfzxcv",
    "r6-both-passwords.pdf": "foo", "crazyones-encrypted-256.pdf": "password",
}


def one_sentence(message: str) -> bool:
    """A single sentence: one line, no sentence break followed by a new capitalised sentence."""
    return "\n" not in message and len(message) < 400 and len(re.findall(r"[.!?]\s+[A-Z]", message)) == 0


def chat_model(llm_server):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=llm_server.base_url, api_key="test", model="scripted-model", max_retries=0, timeout=20)


@pytest.fixture
def tools(sample_pdfs: SamplePdfs, llm_server):
    return {t.name: t for t in build_pdf_tools([sample_pdfs.folder, PDF_CORPUS], chat_model(llm_server))}


def run(tool, **args) -> str:
    return tool.invoke(args)


def error_of(tool, **args) -> str:
    with pytest.raises(ToolError) as info:
        tool.func(**args)
    message = str(info.value)
    assert one_sentence(message), message
    return message


# -- extraction ----------------------------------------------------------------------------------------
def test_extract_one_page_with_title_and_page_header(tools, sample_pdfs):
    out = run(tools["pdf_extract_text"], path=str(sample_pdfs.one))
    assert out.startswith("PDF one.pdf (One page memo): 1 page.")
    assert "--- page 1 ---" in out and "The meeting with Bob is on Tuesday at 10:00" in out


def test_extract_selected_pages_and_range_errors(tools, sample_pdfs):
    out = run(tools["pdf_extract_text"], path=str(sample_pdfs.fifty), pages="7")
    assert "--- page 7 ---" in out and FACTS[7] in out and "--- page 8 ---" not in out
    out = run(tools["pdf_extract_text"], path=str(sample_pdfs.fifty), pages=[2, 3])
    assert "--- page 2 ---" in out and "--- page 3 ---" in out and "--- page 1 ---" not in out
    assert "out of range" in error_of(tools["pdf_extract_text"], path=str(sample_pdfs.fifty), pages="49-51")
    assert "page list" in error_of(tools["pdf_extract_text"], path=str(sample_pdfs.fifty), pages="seven")


def test_long_document_is_cut_with_a_way_to_continue(tools, sample_pdfs):
    out = run(tools["pdf_extract_text"], path=str(sample_pdfs.five_hundred))
    assert len(out) < 32_000
    m = re.search(r"pages='(\d+)-500'", out)
    assert m, out[:300]
    rest = run(tools["pdf_extract_text"], path=str(sample_pdfs.five_hundred), pages=f"{m.group(1)}-{int(m.group(1)) + 2}")
    assert f"--- page {m.group(1)} ---" in rest


def test_encrypted_asks_for_the_password_then_opens(tools, sample_pdfs):
    message = error_of(tools["pdf_extract_text"], path=str(sample_pdfs.encrypted))
    assert "password-protected" in message and "password=" in message
    assert "wrong" in error_of(tools["pdf_extract_text"], path=str(sample_pdfs.encrypted), password="nope")
    out = run(tools["pdf_extract_text"], path=str(sample_pdfs.encrypted), password=SamplePdfs.PASSWORD)
    assert "Page 3 of the report" in out
    # only an owner password: anyone may read it
    assert "Page 2 of the report" in run(tools["pdf_extract_text"], path=str(sample_pdfs.owner_only))


@pytest.mark.parametrize("name, expected", [
    ("scanned", "no text layer"),
    ("truncated", "damaged"),
    ("garbage", "damaged"),
    ("not_pdf", "is not a PDF"),
    ("empty", "empty"),
])
def test_each_bad_file_has_its_own_sentence(tools, sample_pdfs, name, expected):
    message = error_of(tools["pdf_extract_text"], path=str(getattr(sample_pdfs, name)))
    assert expected in message


def test_paths_outside_the_roots_are_refused(tools, tmp_path):
    outside = tmp_path / "elsewhere.pdf"
    outside.write_bytes(b"%PDF-1.4\n")
    assert "outside the folders" in error_of(tools["pdf_extract_text"], path=str(outside))


def test_time_budget_stops_a_slow_read(sample_pdfs):
    slow = {t.name: t for t in build_pdf_tools([sample_pdfs.folder], time_budget_s=0.02, max_extract_chars=10**9)}
    message = error_of(slow["pdf_extract_text"], path=str(sample_pdfs.five_hundred))
    assert "took longer than 0.02 s" in message


def test_a_spent_budget_stops_the_read_however_fast_the_pages_come(sample_pdfs, monkeypatch):
    """Each page used to get a 10 ms grace once the budget was spent, so a document whose pages came quickly was
    never stopped. Here every wait counts as 1 s: the opening and 3 pages fit in 3.5 s, the 4th page does not."""
    clock = itertools.count()
    monkeypatch.setattr(pdf_reader, "time", types.SimpleNamespace(monotonic=lambda: float(next(clock))))
    pages: list[int] = []
    with pytest.raises(ToolError, match="took longer than 3.5 s"):
        with pdf_reader.PdfPages(sample_pdfs.fifty, "fifty.pdf", budget_s=3.5) as doc:
            pages.extend(number for number, _ in doc)
    assert pages == [1, 2, 3]


# -- hostile PDFs: work stops when the budget ends, inside a page too ------------------------------------
def write_crafted_pdf(path: Path, page_streams: list[bytes]) -> Path:
    """A PDF whose pages have these content streams (text operators), each flate-compressed: a stream of tens of
    MB of operators compresses to a few KB, under pypdf's own decompression limit (75 MB), and takes pypdf
    seconds to minutes to parse on one page."""
    count = len(page_streams)
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count)) + b"] /Count %d >>"
            % count,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, stream in enumerate(page_streams):
        data = zlib.compress(stream, 9)
        objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
                    b" /Contents %d 0 R >>" % (5 + 2 * i))
        objs.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream")
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for n, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def _quick_page(n: int) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td (Page %d reads quickly.) Tj ET\n" % n


SLOW_OP = b"BT /F1 9 Tf 20 700 Td (slow) Tj ET\n"


@pytest.fixture(scope="module")
def crafted_pdf(tmp_path_factory) -> Path:
    """Page 2's stream inflates to 8 MB of text operators (about 10 s of pypdf here, 20 KB on disk)."""
    slow = SLOW_OP * (8_000_000 // len(SLOW_OP))
    return write_crafted_pdf(tmp_path_factory.mktemp("crafted") / "crafted.pdf", [_quick_page(1), slow, _quick_page(3)])


def _pdf_children() -> dict[int, str]:
    """This process's children running the PDF reader's child (pdf_child.py): pid -> state (R, S, Z...)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid() and b"pdf_child.py" in cmdline:
            found[int(entry.name)] = state
    return found


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_crafted_slow_page_is_stopped_inside_the_page_and_no_work_is_left(crafted_pdf):
    """The reader's thread used to stop only at the next page: the caller got its answer after the budget, and
    pypdf kept a core busy on page 2 for as long as it took. Now the child reading it is killed at the deadline."""
    budget = 1.5
    tools = {t.name: t for t in build_pdf_tools([crafted_pdf.parent], time_budget_s=budget)}
    readers: set[int] = set()
    calling = threading.Event()

    def watch() -> None:  # the children seen while the read is certainly under way (the spare comes after it)
        until = time.monotonic() + budget * 0.8
        while calling.is_set() and time.monotonic() < until:
            readers.update(_pdf_children())
            time.sleep(0.05)

    calling.set()
    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        message = error_of(tools["pdf_extract_text"], path=str(crafted_pdf))
    finally:
        elapsed = time.monotonic() - started
        calling.clear()
        watcher.join()
    assert elapsed < budget + 8, elapsed  # generous: a loaded 2-core machine
    assert f"took longer than {budget:g} s" in message and "inside page 2" in message, message
    assert "page 1 was read" in message and "pages='3'" in message and "pages='1'" in message, message
    # the child that was reading page 2 is gone (killed and reaped, not a zombie) ...
    assert readers, "no reader child was seen"
    left = _pdf_children()
    assert not readers & set(left), (readers, left)
    assert len(left) <= 1  # at most the spare, waiting for the next read
    # ... and nothing in this process parses on: over 2 s it uses almost no CPU (pypdf alone used a core)
    before = _cpu_s()
    time.sleep(2)
    assert _cpu_s() - before < 0.3


def test_a_page_needing_more_memory_than_allowed_is_stopped_there(crafted_pdf):
    with pytest.raises(ToolError) as info:
        with pdf_reader.PdfPages(crafted_pdf, "crafted.pdf", budget_s=120, memory_mb=150) as doc:
            list(doc)
    message = str(info.value)
    assert one_sentence(message), message
    assert "needed more than 150 MB of memory" in message and "inside page 2" in message, message


def test_a_page_is_read_up_to_its_bound_and_says_so(tmp_path):
    from integrations.pdf_child import MAX_PAGE_CHARS

    long_string = b"(" + b"w" * 2000 + b") Tj\n"
    stream = b"BT /F1 9 Tf 20 700 Td\n" + long_string * (MAX_PAGE_CHARS // 2000 + 50) + b"ET\n"
    path = write_crafted_pdf(tmp_path / "wordy.pdf", [stream, _quick_page(2)])
    with pdf_reader.PdfPages(path, "wordy.pdf") as doc:
        texts = dict(doc)
        assert doc.stats.cut_pages == [1]
    assert len(texts[1]) == MAX_PAGE_CHARS and "Page 2 reads quickly." in texts[2]
    out = build_pdf_tools([tmp_path], max_extract_chars=10**7)[0].func(str(path))
    assert f"The text of pages 1 is longer than {MAX_PAGE_CHARS:,} characters" in out


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_the_child_that_parses_the_pdf_gets_none_of_jarviss_environment(sample_pdfs, monkeypatch):
    monkeypatch.setenv("JARVIS_TEST_SECRET", "s3cret-token")
    for _ in range(2):  # the spare started after the first read was started with the secret in the environment
        build_pdf_tools([sample_pdfs.folder])[0].func(str(sample_pdfs.one))
    children = _pdf_children()
    assert children
    for pid in children:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert b"s3cret-token" not in environ and b"JARVIS_TEST_SECRET" not in environ


def _corpus_files() -> list[Path]:
    return sorted(PDF_CORPUS.rglob("*.pdf"))


def test_every_corpus_pdf_gives_text_or_one_sentence(sample_pdfs):
    tools = {t.name: t for t in build_pdf_tools([PDF_CORPUS], time_budget_s=30)}
    files = _corpus_files()
    assert len(files) > 60
    texts, errors = 0, {}
    for path in files:
        try:
            out = tools["pdf_extract_text"].func(str(path))
            assert out.startswith(f"PDF {path.name}") and "--- page" in out
            texts += 1
        except ToolError as exc:
            assert one_sentence(str(exc)), (path.name, str(exc))
            errors[path.name] = str(exc)
    assert texts > 45
    # the protected ones say so, and open with the README's passwords (r5/r6 with an empty owner password
    # open without one: the empty owner password is tried first, as a PDF viewer does)
    for name, password in CORPUS_PASSWORDS.items():
        if not name.startswith(("r5-", "r6-user")):
            assert "password-protected" in errors[name], (name, errors.get(name))
        path = next(p for p in files if p.name == name)
        assert "--- page 1 ---" in tools["pdf_extract_text"].func(str(path), password=password)
    assert "wrong" in str(pytest.raises(ToolError, tools["pdf_extract_text"].func,
                                        str(PDF_CORPUS / "encryption" / "r6-both-passwords.pdf"), password="bar?").value)
    # images-only files are told apart from damaged ones
    assert "no text layer" in errors["imagemagick-lzw.pdf"]


# -- summaries -----------------------------------------------------------------------------------------
def _page_span(text: str) -> tuple[int, int] | None:
    m = re.search(r"Summarize pages (\d+)-(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_summarize_one_page_in_one_call(tools, sample_pdfs, llm_server):
    llm_server.push({"content": "A memo: Bob meets on Tuesday at 10:00 (p. 1)."})
    out = run(tools["pdf_summarize"], path=str(sample_pdfs.one), style="key_points")
    assert out.startswith("Summary of one.pdf (1 page):") and "Bob meets on Tuesday" in out
    assert len(llm_server.requests) == 1
    prompt = last_message_text(llm_server.requests[0])
    assert "key points" in prompt and "The meeting with Bob" in prompt


def test_summarize_500_pages_map_reduce_within_budget(sample_pdfs, llm_server):
    chunk_tokens = 3000
    tools = {t.name: t for t in build_pdf_tools([sample_pdfs.folder], chat_model(llm_server), chunk_tokens=chunk_tokens)}

    def reply(request):
        text = last_message_text(request)
        span = _page_span(text)
        if span:
            return {"content": f"Notes: pages {span[0]} to {span[1]} discuss quarterly figures (p. {span[0]})."}
        if text.startswith("Merge"):
            return {"content": "Merged notes: the committee discussed figures throughout (p. 1)."}
        return {"content": "FINAL: a long report on quarterly figures (p. 1, p. 333)."}

    llm_server.add_rule(lambda r: True, reply)
    out = run(tools["pdf_summarize"], path=str(sample_pdfs.five_hundred))
    assert "FINAL: a long report" in out and "500 pages" in out
    prompts = [last_message_text(r) for r in llm_server.requests]
    spans = [s for s in map(_page_span, prompts) if s]
    assert len(spans) > 10  # many map calls ...
    covered = [p for lo, hi in spans for p in range(lo, hi + 1)]
    assert covered == list(range(1, 501))  # ... each page in exactly one of them, in order
    for r in llm_server.requests:  # and no call over the budget
        assert estimate_tokens("".join(m["content"] for m in r["messages"])) <= chunk_tokens
    assert "FINAL" not in "".join(prompts)


def test_summary_stops_at_max_chunks_and_says_where(sample_pdfs, llm_server):
    tools = {t.name: t for t in build_pdf_tools([sample_pdfs.folder], chat_model(llm_server), chunk_tokens=600,
                                                max_summary_chunks=3)}
    llm_server.add_rule(lambda r: True, lambda r: {"content": "notes (p. 1)"})
    out = run(tools["pdf_summarize"], path=str(sample_pdfs.fifty))
    m = re.search(r"covers pages 1-(\d+) of 50 .*pages='(\d+)-50'", out)
    assert m and int(m.group(2)) == int(m.group(1)) + 1


def test_summarize_errors_are_the_extraction_errors(tools, sample_pdfs, llm_server):
    assert "no text layer" in error_of(tools["pdf_summarize"], path=str(sample_pdfs.scanned))
    assert "password-protected" in error_of(tools["pdf_summarize"], path=str(sample_pdfs.encrypted))
    assert llm_server.requests == []


def test_model_failure_is_one_sentence(sample_pdfs):
    from langchain_openai import ChatOpenAI

    dead = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="m", max_retries=0, timeout=2)
    tools = {t.name: t for t in build_pdf_tools([sample_pdfs.folder], dead)}
    assert "model server" in error_of(tools["pdf_summarize"], path=str(sample_pdfs.one))


# -- questions -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("which, page, question", [
    ("fifty", 7, "How many herons did Marguerite count on the jetty?"),
    ("five_hundred", 333, "What is the secret ingredient of the harbour soup?"),
])
def test_qa_reads_the_relevant_page_first_and_cites_it(tools, sample_pdfs, llm_server, which, page, question):
    llm_server.push({"content": f"The answer is on (p. {page})."})
    out = run(tools["pdf_qa"], path=str(getattr(sample_pdfs, which)), question=question)
    prompt = last_message_text(llm_server.requests[0])
    first_page = re.search(r"<<page (\d+)>>", prompt)
    assert first_page and int(first_page.group(1)) == page
    assert FACTS[page] in prompt
    assert estimate_tokens(prompt) <= 3000
    assert f"(p. {page})" in out
    consulted = re.search(r"Pages consulted: ([\d,-]+) of", out).group(1)
    pages = {p for part in consulted.split(",") for p in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)}
    assert page in pages


def test_qa_without_matching_words_uses_the_first_pages(tools, sample_pdfs, llm_server):
    llm_server.push({"content": "It is a report (p. 1)."})
    run(tools["pdf_qa"], path=str(sample_pdfs.fifty), question="zzz?")
    assert "<<page 1>>" in last_message_text(llm_server.requests[0])


class _Keeper:
    """A document index that wants every document and keeps what it is handed."""

    def __init__(self):
        self.kept = []

    def wants(self, kind, source, content_hash):
        return True

    def add(self, doc):
        self.kept.append(doc)

    def passages(self, source, content_hash, question, k):
        return None


def test_a_document_too_long_for_the_index_is_not_held_whole_or_kept(sample_pdfs, monkeypatch):
    """With auto-indexing on, pdf_extract_text read on past its answer's cut and held every page's text for the
    index: a 10 KB PDF whose pages share one compressed stream gave 30 MB, in memory and in the index. Past
    MAX_INDEXED_CHARS a document is not kept, and reading stops at the answer's cut."""
    import integrations.pdf_tools as pdf_tools

    keeper = _Keeper()
    extract = next(t for t in build_pdf_tools([sample_pdfs.folder], sink=keeper) if t.name == "pdf_extract_text")
    run(extract, path=str(sample_pdfs.fifty))
    assert len(keeper.kept) == 1  # an ordinary document is kept whole
    monkeypatch.setattr(pdf_tools, "MAX_INDEXED_CHARS", 20_000)
    out = run(extract, path=str(sample_pdfs.five_hundred))
    assert "[Cut at page" in out and len(keeper.kept) == 1  # the long one answered, not kept
