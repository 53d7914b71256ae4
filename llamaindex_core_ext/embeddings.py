"""``CoreEmbedding``: the service's query/passage embedding models as a LlamaIndex embedding.

Queries go to ``<model_name>-query``, texts (documents, nodes) to ``<model_name>-passage``;
both vectors share one space. Batches stay within the service's limits (spec section 8):
at most 100 strings and under 204,800 tokens per request (``backend.embedding_batches``).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, SecretStr, field_validator

from backend import Backend
from backend.embedding_batches import TOKEN_MARGIN, estimate_tokens, plan_batches
from backend.schemas import EmbeddingList
from backend.validation import MAX_EMBEDDING_INPUTS
from llamaindex_core_ext.connection import env_api_key, env_base_url, open_backend

__all__ = ["TOKEN_MARGIN", "CoreEmbedding", "estimate_tokens", "plan_batches"]

DEFAULT_MODEL_NAME = "core-embedding-1-large"


def _vectors(result: EmbeddingList, expected: int) -> list[Embedding]:
    data = sorted(result.data, key=lambda item: item.index)
    if len(data) != expected:
        raise ValueError(f"the service returned {len(data)} embeddings for {expected} inputs")
    vectors = []
    for item in data:
        if isinstance(item.embedding, str):
            raise ValueError("the service returned base64 embeddings; float vectors were requested")
        vectors.append(item.embedding)
    return vectors


class CoreEmbedding(BaseEmbedding):
    """Query and passage embeddings of the service.

    Args:
        model_name: the model family (default ``core-embedding-1-large``); ``-query`` and
            ``-passage`` are appended for queries and texts.
        embed_batch_size: texts per request, 1 to 100 (default 100).
        timeout / max_retries: for the HTTP client; the only retries there are.
        api_key: bearer key (default ``CORE_API_KEY``).
        base_url: server address (default ``CORE_BASE_URL``); None runs the model in-process,
            shared with the other adapter objects of this process.
        backend: a ready ``Backend`` to use instead.
    """

    model_name: str = Field(
        default=DEFAULT_MODEL_NAME,
        description="Model family; '-query' / '-passage' are appended per input type.",
    )
    embed_batch_size: int = Field(
        default=MAX_EMBEDDING_INPUTS,
        gt=0,
        le=MAX_EMBEDDING_INPUTS,
        description="Texts per request (the service takes at most 100).",
    )
    timeout: float = Field(default=60.0, gt=0.0, description="Seconds per HTTP read or write.")
    max_retries: int = Field(default=2, ge=0, description="Retries of the HTTP client.")
    api_key: SecretStr | None = Field(
        default_factory=env_api_key, exclude=True, description="Bearer key (CORE_API_KEY)."
    )
    base_url: str | None = Field(
        default_factory=env_base_url,
        description="Server address (CORE_BASE_URL); None runs the model in this process.",
    )

    _backend: Backend | None = PrivateAttr(default=None)

    def __init__(self, *, backend: Backend | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._backend = backend

    @field_validator("model_name")
    @classmethod
    def _family_name(cls, value: str) -> str:
        if value.endswith(("-query", "-passage")):
            raise ValueError(
                f"model_name is the model family, without '-query' or '-passage' (got "
                f"{value!r}, use {value.rsplit('-', 1)[0]!r}); both models are used"
            )
        return value

    @classmethod
    def class_name(cls) -> str:
        return "CoreEmbedding"

    @property
    def query_model(self) -> str:
        return f"{self.model_name}-query"

    @property
    def passage_model(self) -> str:
        return f"{self.model_name}-passage"

    def get_backend(self) -> Backend:
        """The backend requests go to, opened on first use."""
        # getattr: LlamaIndex's pickling drops an unpicklable backend (worker processes).
        if getattr(self, "_backend", None) is None:
            self._backend = open_backend(
                self.base_url, self.api_key, self.timeout, self.max_retries
            )
        return self._backend

    # One path for both input types: only the model name differs.
    def _embed(self, texts: list[str], model: str) -> list[Embedding]:
        vectors: list[Embedding] = []
        for batch in plan_batches(texts, max_inputs=self.embed_batch_size):
            result = self.get_backend().embed({"model": model, "input": batch})
            vectors.extend(_vectors(result, len(batch)))
        return vectors

    async def _aembed(self, texts: list[str], model: str) -> list[Embedding]:
        vectors: list[Embedding] = []
        for batch in plan_batches(texts, max_inputs=self.embed_batch_size):
            result = await self.get_backend().aembed({"model": model, "input": batch})
            vectors.extend(_vectors(result, len(batch)))
        return vectors

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([query], self.query_model)[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return (await self._aembed([query], self.query_model))[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([text], self.passage_model)[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._aembed([text], self.passage_model))[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._embed(texts, self.passage_model)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await self._aembed(texts, self.passage_model)
