"""``CoreEmbedding`` offline: which model each input type uses, and batching within limits."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from backend.protocol.limits import (
    MAX_TOKENS_PER_EMBEDDING_REQUEST,
    plan_embedding_requests,
    token_upper_bound,
)
from llamaindex_core_ext import CoreEmbedding


def test_long_texts_are_split_by_the_token_budget(scripted):
    backend = scripted()
    texts = ["x" * 3000] * 100  # 3,016 counted tokens each: 67 fit under 204,800
    CoreEmbedding(backend=backend).get_text_embedding_batch(texts)
    sent = [r["input"] for r in backend.requests]
    assert sent == plan_embedding_requests(texts) and [len(r) for r in sent] == [67, 33]
    assert all(sum(map(token_upper_bound, r)) < MAX_TOKENS_PER_EMBEDDING_REQUEST for r in sent)


def test_query_and_passage_models(scripted):
    backend = scripted()
    embedding = CoreEmbedding(backend=backend)
    query = embedding.get_query_embedding("where is the cat")
    text = embedding.get_text_embedding("the cat sat on the mat")
    assert [(r["model"], r["input"]) for r in backend.requests] == [
        ("core-embedding-1-large-query", ["where is the cat"]),
        ("core-embedding-1-large-passage", ["the cat sat on the mat"]),
    ]
    expected = backend.inner.embed(
        {"model": "core-embedding-1-large-query", "input": "where is the cat"}
    )
    assert np.allclose(query, expected.data[0].embedding)
    assert len(query) == len(text) == 26


async def test_async_twins_use_the_same_models(scripted):
    backend = scripted()
    embedding = CoreEmbedding(backend=backend)
    assert await embedding.aget_query_embedding("q") == embedding.get_query_embedding("q")
    assert await embedding.aget_text_embedding("t") == embedding.get_text_embedding("t")
    assert await embedding.aget_text_embedding_batch(
        ["a", "b"]
    ) == embedding.get_text_embedding_batch(["a", "b"])
    models = [r["model"] for r in backend.requests]
    assert models == ["core-embedding-1-large-query"] * 2 + ["core-embedding-1-large-passage"] * 4


@pytest.mark.parametrize("batch_size", [100, 7])
def test_large_batches_are_split(scripted, batch_size):
    backend = scripted()
    texts = [f"document number {i}" for i in range(230)]
    vectors = CoreEmbedding(backend=backend, embed_batch_size=batch_size).get_text_embedding_batch(
        texts
    )
    assert len(vectors) == 230
    sizes = [len(r["input"]) for r in backend.requests]
    assert sum(sizes) == 230 and max(sizes) == batch_size
    # Order kept: the last vector is the last text's.
    last = backend.inner.embed({"model": "core-embedding-1-large-passage", "input": texts[-1]})
    assert np.allclose(vectors[-1], last.data[0].embedding)


def test_defaults_and_validation():
    embedding = CoreEmbedding()
    assert (embedding.model_name, embedding.embed_batch_size) == ("core-embedding-1-large", 100)
    assert (embedding.query_model, embedding.passage_model) == (
        "core-embedding-1-large-query",
        "core-embedding-1-large-passage",
    )
    with pytest.raises(ValidationError, match="less than or equal to 100"):
        CoreEmbedding(embed_batch_size=101)
    with pytest.raises(ValidationError, match="without '-query'"):
        CoreEmbedding(model_name="core-embedding-1-large-query")
    assert (
        CoreEmbedding(model_name="core-1-mini-embedding").query_model
        == "core-1-mini-embedding-query"
    )
