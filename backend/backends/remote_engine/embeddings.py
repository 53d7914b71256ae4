"""Embeddings from an engine's ``/v1/embeddings`` (vLLM pooling models, TEI, Ollama...) behind
the service's own prefixes, limits and long-input windowing.

The engine is wrapped as an ``EmbeddingEngine`` so the in-process embedding path
(``backend.embeddings``) runs unchanged: texts get their query/passage prefix and are
tokenized with the model's tokenizer (``backend.backends.remote_engine.tokenizers``), cut into
windows the encoder can read, and each window is sent as its decoded text. A text that fits one
window is the engine's own vector for it; a longer one is the token-weighted mean of its
windows' vectors, renormalised (in-process averages the windows before normalising, so long
texts may differ in the last digits).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from backend.backends.remote_engine.api import EngineAPI
from backend.backends.remote_engine.tokenizers import WindowTokenizer
from backend.engines.base import EmbeddingEngine

#: Windows per request: TEI's default ``max_client_batch_size``, and small enough for any engine.
WINDOWS_PER_REQUEST = 32


class EngineEmbeddingEngine(EmbeddingEngine):
    """An engine's embedding model as an ``EmbeddingEngine`` (see the module's docstring).

    Args:
        api: the embedding engine.
        model: its model id (asked of the engine on first use when not configured).
        tokenizer: the model's tokenizer (``backend.backends.remote_engine.tokenizers``).
    """

    def __init__(self, api: EngineAPI, model: Callable[[], str], tokenizer: WindowTokenizer):
        self.api = api
        self._model = model
        self.tokenizer = tokenizer
        self.device = api.url
        self.max_window_tokens = tokenizer.max_window_tokens
        self._dimensions: int | None = None
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int:  # type: ignore[override]
        """The engine's vector size, learnt from one short text on first use."""
        with self._lock:
            if self._dimensions is None:
                self._dimensions = len(self._embed_texts(["."])[0])
            return self._dimensions

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        return self.tokenizer.encode(texts)

    def _embed_texts(self, texts: list[str]) -> np.ndarray:
        answer = self.api.embed(self._model(), texts)
        rows = sorted(answer.data, key=lambda item: item.index)
        return np.asarray([row.embedding for row in rows], dtype=np.float32)

    def embed_windows(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        texts = self.tokenizer.decode(windows)
        parts = [
            self._embed_texts(texts[start : start + WINDOWS_PER_REQUEST])
            for start in range(0, len(texts), WINDOWS_PER_REQUEST)
        ]
        if not parts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.concatenate(parts)

    def close(self) -> None:
        self.api.close()
