"""Embedding texts with an encoder, including texts longer than its window.

Query and passage embeddings share one path (like sentence-transformers' ``encode_query`` /
``encode_document``): only the prefix differs (``query: `` / ``passage: `` for e5).

Long inputs: the API allows 4000 tokens per string but the encoder sees 512 at a time. A
long text is cut into consecutive windows of at most ``max_window_tokens - 2`` content
tokens; each window is mean-pooled by the encoder and the text's vector is the average of
its windows weighted by their token counts, then L2-normalised. Nothing is silently
truncated, and a text that fits one window gets exactly the model's ordinary embedding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from backend.engines.base import EmbeddingEngine
from backend.protocol.catalogue import InputType


@dataclass(frozen=True)
class EmbeddingPrefixes:
    query: str = "query: "
    passage: str = "passage: "

    def for_type(self, input_type: InputType) -> str:
        return self.query if input_type is InputType.QUERY else self.passage


@dataclass(frozen=True)
class TokenizedTexts:
    content_ids: list[list[int]]

    @property
    def token_counts(self) -> list[int]:
        """Tokens the encoder reads per text: content plus begin and end tokens."""
        return [len(ids) + 2 for ids in self.content_ids]


class WindowedEncoder:
    """An embedding engine behind the prefixes and the windowing described above."""

    def __init__(self, engine: EmbeddingEngine, prefixes: EmbeddingPrefixes | None = None):
        self.engine = engine
        self.prefixes = prefixes or EmbeddingPrefixes()

    def tokenize(self, texts: Sequence[str], input_type: InputType) -> TokenizedTexts:
        prefix = self.prefixes.for_type(input_type)
        return TokenizedTexts(self.engine.tokenize([prefix + text for text in texts]))

    def embed_tokenized(self, tokenized: TokenizedTexts) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text, in input order."""
        window = self.engine.max_window_tokens - 2
        windows: list[list[int]] = []
        owners: list[int] = []
        for i, ids in enumerate(tokenized.content_ids):
            for start in range(0, max(len(ids), 1), window):
                windows.append(ids[start : start + window])
                owners.append(i)
        pooled = self.engine.embed_windows(windows)
        weights = np.array([max(len(w), 1) for w in windows], dtype=np.float32)
        vectors = np.zeros((len(tokenized.content_ids), pooled.shape[1]), dtype=np.float32)
        np.add.at(vectors, np.array(owners), pooled * weights[:, None])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    def embed_many(self, requests: Sequence[TokenizedTexts]) -> list[np.ndarray]:
        """Several requests' vectors from one combined run (the engine batches them together)."""
        combined = TokenizedTexts([ids for request in requests for ids in request.content_ids])
        vectors = self.embed_tokenized(combined)
        ends = np.cumsum([len(request.content_ids) for request in requests])[:-1]
        return np.split(vectors, ends)

    def embed(self, texts: Sequence[str], input_type: InputType) -> np.ndarray:
        return self.embed_tokenized(self.tokenize(texts, input_type))
