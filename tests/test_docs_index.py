"""The document index: real SQLite FTS5 file, real PDFs (the corpus and generated ones), embeddings from the
scripted server's /v1/embeddings, the CLI in a subprocess, auto-indexing by the reading tools."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import responses

from integrations.base import ToolError, tool_meta
from integrations.pdf_tools import build_pdf_tools
from orchestrator.docs_index import DocsIndex, fuse
from orchestrator.docs_index.files import add_paths, sync
from tests.conftest import CORPUS
from tests.fakes.llm_server import last_message_text
from tests.fakes.pdfs import FACTS, write_pdf

PDF_CORPUS = CORPUS / "pdf"


def _index(env) -> DocsIndex:
    return DocsIndex(env.settings)


def with_embeddings(env) -> None:
    env.write_config(models={"embeddings": {"base_url": env.server.base_url, "model": "embed-test", "api_key": "test"}})


def test_every_readable_corpus_pdf_is_indexed_and_the_right_page_comes_first(jarvis_env, sample_pdfs):
    index = _index(jarvis_env)
    report = add_paths(index, [PDF_CORPUS, sample_pdfs.fifty])
    indexed = {d.source for d in index.documents()}
    failed = {str(p.resolve()): why for p, why in report.failed}
    every = {str(p.resolve()) for p in PDF_CORPUS.rglob("*.pdf")} | {str(sample_pdfs.fifty.resolve())}
    assert indexed | set(failed) == every and len(indexed) > 45
    # what was left out is what pdf_extract_text cannot read either (a password, no text layer)
    extract = next(t for t in build_pdf_tools([PDF_CORPUS]) if t.name == "pdf_extract_text")
    for path, why in failed.items():
        assert "password" in why or "no text layer" in why, (path, why)
        with pytest.raises(ToolError):
            extract.func(path)

    hit = index.search("Which four packages constitute the NHNC1?", 3)[0]
    assert hit.source.endswith("GeoBase_NHNC1_Data_Model_UML_EN.pdf") and hit.page == 7
    hit = index.search("first draft for discussion with Nova Scotia", 3)[0]
    assert hit.source.endswith("GeoBase_NHNC1_Data_Model_UML_EN.pdf") and hit.page == 3
    hit = index.search("how many herons did the lighthouse keeper count", 3)[0]
    assert hit.source == str(sample_pdfs.fifty.resolve()) and hit.page == 7 and FACTS[7] in hit.text


def test_changed_reindexed_unchanged_skipped_deleted_dropped(jarvis_env, tmp_path):
    with_embeddings(jarvis_env)
    index = _index(jarvis_env)
    folder = tmp_path / "notes"
    folder.mkdir()
    note = folder / "garden.md"
    note.write_text("# Garden\n\nThe tomatoes need water every morning.\n\nThe roses bloom in June.\n")
    pdf = write_pdf(folder / "report.pdf", 3, facts={2: "The orchard produced nine tons of apples."})
    embedded = jarvis_env.server.brain.embedding_requests

    first = add_paths(index, [folder])
    assert sorted(p.name for p in first.added) == ["garden.md", "report.pdf"]
    inputs_after_first = sum(len(r["input"]) for r in embedded)
    assert inputs_after_first == index.stats()["chunks"] and index.stats()["vectors"] == index.stats()["chunks"]

    again = add_paths(index, [folder])
    assert sorted(p.name for p in again.unchanged) == ["garden.md", "report.pdf"] and again.pages == 0
    assert sum(len(r["input"]) for r in embedded) == inputs_after_first  # nothing re-read, nothing re-embedded

    note.write_text("# Garden\n\nThe tomatoes need water every morning.\n\nThe roses bloom in May now.\n")
    changed = add_paths(index, [folder])
    assert [p.name for p in changed.updated] == ["garden.md"] and [p.name for p in changed.unchanged] == ["report.pdf"]
    assert index.search("roses bloom", 1)[0].text.endswith("The roses bloom in May now.")
    assert all("June" not in h.text for h in index.search("roses June", 5))

    pdf.unlink()
    result = sync(index)
    assert result.removed == [str(pdf)] and [d.source for d in index.documents()] == [str(note)]
    assert all(h.source == str(note) for h in index.search("orchard apples", 5))


def test_only_changed_chunks_are_embedded_again(jarvis_env, tmp_path):
    with_embeddings(jarvis_env)
    index = _index(jarvis_env)
    note = tmp_path / "long.txt"
    paragraphs = [f"Paragraph {i}: " + " ".join(f"word{i}_{j}" for j in range(150)) for i in range(6)]
    note.write_text("\n\n".join(paragraphs))
    add_paths(index, [note])
    before = sum(len(r["input"]) for r in jarvis_env.server.brain.embedding_requests)
    chunks = index.stats()["chunks"]
    assert chunks >= 3
    paragraphs[-1] = "Paragraph 5 rewritten: the ending changed completely."
    note.write_text("\n\n".join(paragraphs))
    add_paths(index, [note])
    new_inputs = sum(len(r["input"]) for r in jarvis_env.server.brain.embedding_requests) - before
    assert 1 <= new_inputs < index.stats()["chunks"]


def test_hybrid_search_fuses_keyword_and_vector_rankings(jarvis_env, sample_pdfs):
    with_embeddings(jarvis_env)
    index = _index(jarvis_env)
    add_paths(index, [sample_pdfs.fifty, PDF_CORPUS / "GeoBase_NHNC1_Data_Model_UML_EN.pdf",
                      PDF_CORPUS / "Seige_of_Vicksburg_Sample_OCR.pdf"])
    assert index.stats()["vectors"] == index.stats()["chunks"] > 0
    query = "lighthouse keeper herons jetty"
    keyword = index.keyword_ranking(query)
    vector = index.vector_ranking(query)
    assert vector and len(vector) == 50
    hits = index.search(query, 5)
    assert [h.chunk_id for h in hits] == [cid for cid, _ in fuse(keyword, vector)][:5]
    assert hits[0].page == 7 and hits[0].keyword_rank == 1 and hits[0].vector_rank is not None
    assert hits[0].vector_rank == vector.index(hits[0].chunk_id) + 1
    # the vector side finds chunks the keywords alone do not rank (every chunk has a vector)
    assert len(set(vector) - set(keyword)) > 0


def test_without_embeddings_endpoint_keyword_search_said_once(jarvis_env, sample_pdfs, caplog):
    with_embeddings(jarvis_env)
    jarvis_env.server.brain.embeddings_enabled = False
    index = _index(jarvis_env)
    with caplog.at_level(logging.INFO, logger="orchestrator.llm.embeddings"):
        add_paths(index, [sample_pdfs.fifty])
        hits = index.search("herons lighthouse", 3)
        index.search("quarterly figures", 3)
    assert hits[0].page == 7 and hits[0].vector_rank is None and index.stats()["vectors"] == 0
    said = [r for r in caplog.records if "keywords only" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    # the endpoint comes back: sync gives the chunks their vectors
    jarvis_env.server.brain.embeddings_enabled = True
    index.embedder._down_until = 0.0  # the retry delay has passed
    sync(index)
    assert index.stats()["vectors"] == index.stats()["chunks"]


def test_no_embeddings_configured_is_keyword_only_and_not_an_error(jarvis_env, sample_pdfs, caplog):
    index = _index(jarvis_env)
    with caplog.at_level(logging.INFO, logger="orchestrator.llm.embeddings"):
        add_paths(index, [sample_pdfs.fifty])
        assert index.search("herons", 1)[0].page == 7
        index.search("herons", 1)
    assert len([r for r in caplog.records if "models.embeddings is not set" in r.getMessage()]) == 1
    assert jarvis_env.server.brain.embedding_requests == []


def test_reading_tools_index_what_they_read_and_pdf_qa_uses_it(jarvis_env, sample_pdfs):
    from orchestrator.app import App

    settings = jarvis_env.settings
    pdf = jarvis_env.root / "report.pdf"
    shutil.copy(sample_pdfs.fifty, pdf)
    app = App(settings)
    tools = {t.name: t for t in app.static_tools()}
    server = jarvis_env.server
    server.add_rule(lambda r: True, lambda r: {"content": "Forty-two herons (p. 7)."})
    out = tools["pdf_extract_text"].invoke({"path": str(pdf), "pages": "1-2"})
    index = app.docs_index
    assert index.get(str(pdf)) is None  # a part of a document is not indexed
    tools["pdf_summarize"].invoke({"path": str(pdf)})
    doc = index.get(str(pdf))
    assert doc is not None and doc.source_tool == "pdf_summarize" and doc.segments == 50
    out = tools["pdf_qa"].invoke({"path": str(pdf), "question": "How many herons did Marguerite count?"})
    assert "from the document index" in out
    prompt = last_message_text(server.requests[-1])
    assert prompt.index("<<page 7>>") < prompt.index("<<page", prompt.index("<<page 7>>") + 1) if prompt.count("<<page") > 1 else True
    assert FACTS[7] in prompt
    # a changed file is read again, not answered from stale passages
    write_pdf(pdf, 5, facts={3: "The herons left for the south."})
    out = tools["pdf_qa"].invoke({"path": str(pdf), "question": "Where did the herons go?"})
    assert "from the document index" not in out
    assert index.get(str(pdf)).segments == 5  # and re-indexed on the way

    hits = tools["docs_search"].invoke({"query": "herons south", "k": 2})
    assert hits[0]["source"] == str(pdf) and hits[0]["page"] == 3
    assert tool_meta(tools["docs_search"]).untrusted_output and tool_meta(tools["docs_ask"]).untrusted_output


def test_transcripts_are_indexed_with_timestamps(jarvis_env):
    from orchestrator.app import App

    yt = CORPUS / "youtube"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.post("https://www.youtube.com/youtubei/v1/player", body=(yt / "youtube.innertube.json.static").read_bytes(),
                  content_type="application/json")
        mock.get("https://www.youtube.com/watch", body=(yt / "youtube.html.static").read_bytes())
        mock.get("https://www.youtube.com/api/timedtext", body=(yt / "transcript.xml.static").read_bytes())
        app = App(jarvis_env.settings)
        tools = {t.name: t for t in app.static_tools()}
        tools["yt_get_transcript"].invoke({"url": "https://youtu.be/GJLlxj_dtq8"})
    hit = app.docs_index.search("original transcript test", 1)[0]
    assert hit.source == "https://www.youtube.com/watch?v=GJLlxj_dtq8" and hit.kind == "youtube"
    assert hit.start_s == 0.0 and hit.where == "[00:00]"


def test_docs_ask_cites_numbered_sources(jarvis_env, sample_pdfs):
    from orchestrator.app import App

    tools = {t.name: t for t in App(jarvis_env.settings).static_tools()}
    with pytest.raises(ToolError, match="index is empty"):
        tools["docs_ask"].func("anything?")
    add_paths(_index(jarvis_env), [sample_pdfs.fifty, sample_pdfs.one])
    jarvis_env.server.push({"content": "Marguerite counted forty-two herons [1]."})
    out = tools["docs_ask"].invoke({"question": "How many herons did Marguerite count?"})
    prompt = last_message_text(jarvis_env.server.requests[-1])
    assert prompt.split("\n\n[1] ")[1].startswith("fifty.pdf p. 7") and FACTS[7] in prompt
    assert out.startswith("Marguerite counted forty-two herons [1].") and "Sources:\n[1] fifty.pdf p. 7" in out
    with pytest.raises(ToolError, match="matches that question"):
        tools["docs_ask"].func("zzzyx qqqv")


def test_cli_add_list_remove_sync(jarvis_env, sample_pdfs, tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(sample_pdfs.fifty, folder / "big.pdf")
    shutil.copy(sample_pdfs.scanned, folder / "sub" / "scan.pdf")
    (folder / "sub" / "todo.md").write_text("# Todo\n\n- call the plumber\n")
    proc = jarvis_env.cli("docs", "add", str(folder), check=True)
    assert "added 2, updated 0, unchanged 0, failed 1 (51 pages read)" in proc.stdout
    assert "big.pdf: page 50/50" in proc.stderr and "skipped" in proc.stderr and "no text layer" in proc.stderr
    docs = json.loads(jarvis_env.cli("docs", "list", "--json", check=True).stdout)
    assert {Path(d["source"]).name: d["segments"] for d in docs} == {"big.pdf": 50, "todo.md": 1}
    search = jarvis_env.cli("docs", "search", "lighthouse keeper herons", check=True).stdout
    assert search.startswith("1. big.pdf p. 7")
    todo = next(d for d in docs if d["source"].endswith("todo.md"))
    assert jarvis_env.cli("docs", "remove", str(todo["id"]), check=True).stdout.startswith(f"removed {todo['id']}")
    assert jarvis_env.cli("docs", "remove", "999").returncode == 1
    (folder / "big.pdf").unlink()
    proc = jarvis_env.cli("docs", "sync", check=True)
    assert "removed 1" in proc.stdout and "0 documents" in proc.stdout
    assert jarvis_env.cli("docs", "add", str(tmp_path / "nope")).returncode == 1
