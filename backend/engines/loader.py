"""Building the configured engines (imports torch lazily: HTTP-only users never need it)."""

from __future__ import annotations

import logging
import time

from backend.config import EngineConfig
from backend.engines.base import ChatEngine, EmbeddingEngine

logger = logging.getLogger(__name__)


def load_chat_engine(config: EngineConfig) -> ChatEngine:
    from backend.engines.transformers_chat import TransformersChatEngine
    from backend.weights.embedded_chat import resolve_chat_model

    started = time.perf_counter()
    engine = TransformersChatEngine(
        resolve_chat_model(config.chat_model), device=config.device, dtype=config.chat_dtype
    )
    logger.info(
        "chat model %s loaded on %s in %.1f s",
        config.chat_model,
        engine.device,
        time.perf_counter() - started,
    )
    return engine


def load_embedding_engine(config: EngineConfig) -> EmbeddingEngine:
    from backend.engines.transformers_embeddings import TransformersEmbeddingEngine
    from backend.weights.embedded_e5 import resolve_embedding_model

    started = time.perf_counter()
    engine = TransformersEmbeddingEngine(
        resolve_embedding_model(config.embedding_model),
        device=config.device,
        dtype=config.embedding_dtype,
    )
    logger.info(
        "embedding model %s loaded on %s in %.1f s",
        config.embedding_model,
        engine.device,
        time.perf_counter() - started,
    )
    return engine
