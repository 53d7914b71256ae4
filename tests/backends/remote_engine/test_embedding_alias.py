"""An embeddings engine that serves multilingual-e5-small under another name ("e5", as vLLM's
``--served-model-name`` or a TEI deployment may), used as a new user would:
``backend.connect(engine_url=..., embeddings_url=..., embedding_model="e5")``.

The name is never looked up on the model hub: the backend cuts long inputs with the tokenizer
it is given (``embedding_tokenizer=``), else the engine's own ``/tokenize``, else it refuses,
naming the option. Real engines on loopback (``backend.testing.engine_servers``); the chat
engine is never asked, so ``engine_url`` points at the embeddings engine too.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import backend
from backend.backends.local import InProcessBackend
from backend.protocol.schemas import EmbeddingList
from backend.testing.engine_servers import RunningEngine, embeddings_engine
from backend.testing.engines import ScriptedChatEngine

ALIAS = "e5"
MODELS = ("core-embedding-1-large-query", "core-embedding-1-large-passage")
#: The last is longer than e5's 512-token window: cut into windows with the model's tokenizer.
TEXTS = [
    "Paris is the capital of France.",
    "서울은 한국의 수도이다.",
    "A long passage about harbours and ferries. " * 120,
]


@pytest.fixture(scope="module")
def e5():
    from backend.engines.loader import load_embedding_engine

    engine = load_embedding_engine("multilingual-e5-small")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def plain_engine(e5) -> Iterator[RunningEngine]:
    """``/v1/embeddings`` and ``/v1/models`` only, as llama-cpp-python's or Ollama's servers."""
    with embeddings_engine(e5, model_id=ALIAS) as engine:
        yield engine


@pytest.fixture(scope="module", params=["vllm", "tei"])
def engine_with_tokenize(request, e5) -> Iterator[RunningEngine]:
    """The same engine with vLLM's or TEI's tokenize endpoints."""
    with embeddings_engine(e5, model_id=ALIAS, tokenize_api=request.param) as engine:
        yield engine


@pytest.fixture(scope="module")
def in_process(e5) -> dict[str, EmbeddingList]:
    """What the in-process backend answers on the same model: the reference."""
    local = InProcessBackend(
        chat_engine_instance=ScriptedChatEngine(), embedding_engine_instance=e5
    )
    return {model: local.embed({"model": model, "input": TEXTS}) for model in MODELS}


def _connect(engine: RunningEngine, **options) -> backend.Backend:
    return backend.connect(
        engine_url=engine.url, embeddings_url=engine.url, embedding_model=ALIAS, **options
    )


def _assert_same_as_in_process(service: backend.Backend, reference: dict) -> None:
    """The same vectors (a long text's windows are averaged after the engine normalised each,
    in-process before: the last digits may move) and the same token counts: the windows were
    cut with e5's own tokenizer."""
    for model, expected in reference.items():
        answer = service.embed({"model": model, "input": TEXTS})
        cosines = np.sum(np.array(answer.float_vectors()) * np.array(expected.float_vectors()), 1)
        assert cosines[:-1].min() >= 1 - 1e-5, cosines  # one window: the engine's own vector
        assert cosines[-1] >= 1 - 1e-3, cosines
        assert answer.usage == expected.usage


def test_an_alias_without_a_tokenizer_is_refused_with_the_option_to_set(plain_engine):
    with _connect(plain_engine) as service:
        with pytest.raises(backend.ServiceUnavailableError) as refused:
            service.embed({"model": "core-embedding-1-large-query", "input": "hello"})
    message = refused.value.message
    assert "'e5'" in message and "embedding_tokenizer=" in message
    assert (
        "CORE_ENGINE_EMBEDDING_TOKENIZER" in message and "--engine-embedding-tokenizer" in message
    )


def test_the_tokenizer_named_by_the_option_cuts_the_windows(plain_engine, in_process):
    from backend.engines.weights.embedded_e5 import resolve_embedding_model

    folder = resolve_embedding_model("multilingual-e5-small")  # a local tokenizer folder
    with _connect(plain_engine, embedding_tokenizer=folder) as service:
        _assert_same_as_in_process(service, in_process)


def test_the_option_comes_from_the_environment(plain_engine, in_process, monkeypatch):
    monkeypatch.setenv("CORE_ENGINE_EMBEDDING_TOKENIZER", "intfloat/multilingual-e5-small")
    with _connect(plain_engine) as service:  # the embedded e5's name: its tokenizer, offline
        _assert_same_as_in_process(service, in_process)


def test_the_engine_own_tokenize_endpoint_is_used(engine_with_tokenize, in_process):
    with _connect(engine_with_tokenize) as service:
        _assert_same_as_in_process(service, in_process)


def test_adapters_pass_the_option_on(plain_engine, in_process):
    from backend.engines.weights.embedded_e5 import resolve_embedding_model
    from langchain_core_ext import CoreEmbeddings

    embeddings = CoreEmbeddings(
        engine_url=plain_engine.url,
        embeddings_url=plain_engine.url,
        embedding_model=ALIAS,
        embedding_tokenizer=resolve_embedding_model("multilingual-e5-small"),
    )
    try:
        vector = np.asarray(embeddings.embed_query(TEXTS[0]))
    finally:
        embeddings.close()
    expected = np.array(in_process[MODELS[0]].float_vectors()[0])
    assert float(np.dot(vector, expected)) >= 1 - 1e-5
