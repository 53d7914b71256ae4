"""Real engines on loopback for the engine backend's tests: llama-cpp-python's server on the
embedded small GGUF (chat, and the judge's logprobs) and the e5 stand-in for TEI or vLLM's
pooling models (embeddings), started once per module that uses them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from backend.backends.remote_engine import EngineBackend
from backend.testing.engine_servers import RunningEngine, embeddings_engine, llama_cpp_engine


@pytest.fixture(scope="package")
def chat_engine() -> Iterator[RunningEngine]:
    with llama_cpp_engine("small", model_alias="qwen2.5-coder-0.5b-q4") as engine:
        yield engine


@pytest.fixture(scope="package")
def pooling_engine() -> Iterator[RunningEngine]:
    with embeddings_engine() as engine:
        yield engine


@pytest.fixture(scope="package")
def engine_options(chat_engine, pooling_engine) -> dict[str, str]:
    """The options that put the service on both engines (``backend.connect``, the adapters,
    ``EngineBackend``), with the small profile's calibration reused (the engine serves those
    weights)."""
    return {
        "engine_url": chat_engine.url,
        "chat_model": chat_engine.model,
        "embeddings_url": pooling_engine.url,
        "embedding_model": pooling_engine.model,
        "judge_calibration": "small",
    }


@pytest.fixture
def engine_backend(engine_options) -> Iterator[EngineBackend]:
    """The service on both engines, as ``backend.connect(engine_url=...)`` builds it."""
    service = EngineBackend(**engine_options)
    yield service
    service.close()
