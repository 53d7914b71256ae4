"""Embeddings from an engine's ``/v1/embeddings`` (vLLM pooling models, TEI, Ollama...) behind
the service's own prefixes, limits and long-input windowing.

The engine is wrapped as an ``EmbeddingEngine`` so the in-process embedding path
(``backend.embeddings``) runs unchanged: texts get their query/passage prefix and are
tokenized here with the model's tokenizer, cut into windows the encoder can read, and each
window is sent as its decoded text. A text that fits one window is the engine's own vector for
it; a longer one is the token-weighted mean of its windows' vectors, renormalised (in-process
averages the windows before normalising, so long texts may differ in the last digits).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from backend.engines.base import EmbeddingEngine
from backend.remote_engine.api import EngineAPI

#: Windows per request: TEI's default ``max_client_batch_size``, and small enough for any engine.
WINDOWS_PER_REQUEST = 32
#: The embedded model's name: its tokenizer ships with the local extra.
EMBEDDED_E5 = "multilingual-e5-small"


def embedding_tokenizer(model: str) -> Any:
    """The tokenizer of the engine's embedding model: the embedded e5's for any
    ``multilingual-e5-small`` (``intfloat/multilingual-e5-small`` on vLLM or TEI), else the
    Hugging Face tokenizer of that id or folder."""
    from transformers import AutoTokenizer

    if model.rstrip("/").rsplit("/", 1)[-1] == EMBEDDED_E5:
        from backend.engines.weights.embedded_e5 import resolve_embedding_model

        model = resolve_embedding_model(EMBEDDED_E5)
    return AutoTokenizer.from_pretrained(model)


class EngineEmbeddingEngine(EmbeddingEngine):
    """An engine's embedding model as an ``EmbeddingEngine`` (see the module's docstring).

    Args:
        api: the embedding engine.
        model: its model id (asked of the engine on first use when not configured).
        tokenizer: the model's tokenizer (``embedding_tokenizer``).
    """

    def __init__(self, api: EngineAPI, model: Callable[[], str], tokenizer: Any) -> None:
        self.api = api
        self._model = model
        self.tokenizer = tokenizer
        self.device = api.url
        self.max_window_tokens = min(int(tokenizer.model_max_length), 8192)
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
        if not texts:
            return []
        encoded = self.tokenizer(
            list(texts), add_special_tokens=False, truncation=False, verbose=False
        )
        return [list(ids) for ids in encoded["input_ids"]]

    def _embed_texts(self, texts: list[str]) -> np.ndarray:
        answer = self.api.embed(self._model(), texts)
        rows = sorted(answer.data, key=lambda item: item.index)
        return np.asarray([row.embedding for row in rows], dtype=np.float32)

    def embed_windows(self, windows: Sequence[Sequence[int]]) -> np.ndarray:
        texts = [self.tokenizer.decode(list(window)) for window in windows]
        parts = [
            self._embed_texts(texts[start : start + WINDOWS_PER_REQUEST])
            for start in range(0, len(texts), WINDOWS_PER_REQUEST)
        ]
        if not parts:
            return np.empty((0, self.dimensions), dtype=np.float32)
        return np.concatenate(parts)

    def close(self) -> None:
        self.api.close()
