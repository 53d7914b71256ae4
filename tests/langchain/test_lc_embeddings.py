"""``CoreEmbeddings`` offline: the standard unit suite, query/passage routing and the
splitting of long lists into requests within the service's limits."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_tests.unit_tests import EmbeddingsUnitTests

from backend.protocol.limits import (
    MAX_EMBEDDING_INPUTS,
    MAX_TOKENS_PER_EMBEDDING_REQUEST,
    plan_embedding_requests,
    token_upper_bound,
)
from langchain_core_ext import CoreEmbeddings


class TestCoreEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[CoreEmbeddings]:
        return CoreEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {"model": "core-embedding-1-large"}

    @property
    def init_from_env_params(self) -> tuple[dict, dict, dict]:
        return (
            {"CORE_API_KEY": "env-key", "CORE_BASE_URL": "http://127.0.0.1:9"},
            {},
            {"api_key": "env-key", "base_url": "http://127.0.0.1:9"},
        )


def _texts(n: int) -> list[str]:
    return [f"document number {i} about {'abcdefghij'[i % 10]}" for i in range(n)]


@pytest.mark.parametrize("use_async", [False, True])
async def test_documents_use_the_passage_model_in_limited_requests(scripted, use_async):
    service = scripted()
    embeddings = CoreEmbeddings(backend=service)
    texts = _texts(230)
    vectors = (
        await embeddings.aembed_documents(texts) if use_async else embeddings.embed_documents(texts)
    )
    assert [len(r["input"]) for r in service.requests] == [100, 100, 30]
    assert {r["model"] for r in service.requests} == {"core-embedding-1-large-passage"}
    assert len(vectors) == 230 and all(isinstance(v[0], float) for v in vectors)
    one_by_one = [embeddings.embed_documents([t])[0] for t in (texts[0], texts[150], texts[229])]
    assert np.allclose([vectors[0], vectors[150], vectors[229]], one_by_one)


def test_long_documents_are_split_by_the_token_budget(scripted):
    service = scripted()
    texts = ["x" * 3900] * 70  # 52 x (3,900 + 16) < 204,800 < 53 x ...
    CoreEmbeddings(backend=service).embed_documents(texts)
    sent = [r["input"] for r in service.requests]
    assert sent == plan_embedding_requests(texts) and [len(r) for r in sent] == [52, 18]
    assert all(sum(map(token_upper_bound, r)) < MAX_TOKENS_PER_EMBEDDING_REQUEST for r in sent)


@pytest.mark.parametrize("use_async", [False, True])
async def test_query_uses_the_query_model(scripted, use_async):
    service = scripted()
    embeddings = CoreEmbeddings(backend=service)
    vector = (
        await embeddings.aembed_query("what about a?")
        if use_async
        else embeddings.embed_query("what about a?")
    )
    assert service.requests == [{"model": "core-embedding-1-large-query", "input": "what about a?"}]
    assert len(vector) == 26 and abs(float(np.linalg.norm(vector)) - 1) < 1e-5


def test_model_family_is_configurable(scripted):
    service = scripted()
    embeddings = CoreEmbeddings(backend=service, model="core-1-mini-embedding")
    assert (embeddings.query_model, embeddings.passage_model) == (
        "core-1-mini-embedding-query",
        "core-1-mini-embedding-passage",
    )


def test_show_progress_draws_a_bar(scripted, capsys):
    CoreEmbeddings(backend=scripted(), show_progress=True).embed_documents(
        _texts(MAX_EMBEDDING_INPUTS + 1)
    )
    assert "Embedding 101 texts" in capsys.readouterr().err


def test_no_documents_no_request(scripted):
    service = scripted()
    assert CoreEmbeddings(backend=service).embed_documents([]) == []
    assert service.requests == []
