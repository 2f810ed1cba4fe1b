"""An embeddings endpoint's answer that is not one vector per text sent (a broken or hostile server) gives keyword
search for a while, said in the log: never a vector filed under another text, a NaN in an index, or an answer
kept in memory past its bound (llm/embeddings.py; the document index, memory and the tool index share it)."""

from __future__ import annotations

import json
import logging

import pytest

from orchestrator.llm.embeddings import Embedder, make_embedder
from orchestrator.tools.index import tool_embedding


def _body(vectors: list, indexes: list | None = None) -> bytes:
    indexes = list(range(len(vectors))) if indexes is None else indexes
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in zip(indexes, vectors)]
    return json.dumps({"object": "list", "data": data, "model": "emb"}).encode()


def _unit(i: int, dims: int = 8) -> list[float]:
    return [1.0 if d == i % dims else 0.0 for d in range(dims)]


BROKEN = {
    "one vector too few": lambda texts: _body([_unit(i) for i in range(len(texts) - 1)]),
    "one vector too many": lambda texts: _body([_unit(i) for i in range(len(texts) + 1)]),
    "an index twice": lambda texts: _body([_unit(i) for i in range(len(texts))], [0] * len(texts)),
    "NaN": lambda texts: _body([[float("nan")] * 8 for _ in texts]),
    "infinity": lambda texts: _body([[float("inf")] + [0.0] * 7 for _ in texts]),
    "all zeros": lambda texts: _body([[0.0] * 8 for _ in texts]),
    "lengths differ": lambda texts: _body([_unit(i, 8 + i) for i in range(len(texts))]),
    "not numbers": lambda texts: _body([["a"] * 8 for _ in texts]),
    "nested": lambda texts: _body([[[1.0, 2.0]] * 4 for _ in texts]),
}


@pytest.fixture
def embeddings_env(jarvis_env):
    jarvis_env.write_config(models={"embeddings": {"base_url": jarvis_env.server.base_url, "model": "emb",
                                                   "api_key": "test", "max_answer_kb": 64}})
    return jarvis_env


def test_well_formed_vectors_are_taken(embeddings_env):
    embeddings_env.server.brain.embedding_answer = lambda texts: _body([_unit(i) for i in range(len(texts))])
    vectors = Embedder(embeddings_env.settings.models.embeddings).embed(["a", "b", "c"])
    assert vectors is not None and [int(v.argmax()) for v in vectors] == [0, 1, 2]
    # indexes past 9, answered out of order (a first version compared them as text)
    embeddings_env.server.brain.embedding_answer = lambda texts: _body(
        [_unit(i, 16) for i in reversed(range(len(texts)))], list(reversed(range(len(texts)))))
    vectors = Embedder(embeddings_env.settings.models.embeddings).embed([f"t{i}" for i in range(12)])
    assert vectors is not None and [int(v.argmax()) for v in vectors] == list(range(12))


@pytest.mark.parametrize("shape", list(BROKEN))
def test_an_answer_that_is_not_a_vector_per_text_gives_keyword_search(embeddings_env, shape, caplog):
    embeddings_env.server.brain.embedding_answer = BROKEN[shape]
    with caplog.at_level(logging.WARNING, logger="orchestrator.llm.embeddings"):
        assert Embedder(embeddings_env.settings.models.embeddings).embed(["a", "b", "c"]) is None
    said = [r.getMessage() for r in caplog.records if "keywords only" in r.getMessage()]
    assert len(said) == 1 and "gave no vectors" in said[0], said


def test_an_answer_past_its_size_is_stopped_not_kept(embeddings_env, caplog):
    # 3 vectors of 20,000 numbers: about 400 KB, past the 64 KB bound set above
    embeddings_env.server.brain.embedding_answer = lambda texts: _body([[0.5] * 20_000 for _ in texts])
    with caplog.at_level(logging.WARNING, logger="orchestrator.llm.embeddings"):
        assert Embedder(embeddings_env.settings.models.embeddings).embed(["a", "b", "c"]) is None
    assert any("models.embeddings.max_answer_kb" in r.getMessage() for r in caplog.records), caplog.text


def test_the_tool_index_uses_the_same_checks(embeddings_env):
    embeddings_env.server.brain.embedding_answer = BROKEN["NaN"]
    embed = tool_embedding(make_embedder(embeddings_env.settings))
    with pytest.raises(RuntimeError, match="gave no vectors"):
        embed(["find files", "send a message"])
    embeddings_env.server.brain.embedding_answer = None  # the scripted server's own vectors
    embed = tool_embedding(make_embedder(embeddings_env.settings))
    assert [len(v) for v in embed(["find files", "send a message"])] == [64, 64]
