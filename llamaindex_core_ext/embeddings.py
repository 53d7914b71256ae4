"""``CoreEmbedding``: the service's query/passage embedding models as a LlamaIndex embedding.

Queries go to ``<model_name>-query``, texts (documents, nodes) to ``<model_name>-passage``;
both vectors share one space. Batches stay within the service's limits (spec section 8):
at most 100 strings and under 204,800 tokens per request (``backend.protocol.limits``).
"""

from __future__ import annotations

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, field_validator

from backend.protocol.catalogue import DEFAULT_EMBEDDING_FAMILY, InputType, embedding_model
from backend.protocol.limits import MAX_EMBEDDING_INPUTS, plan_embedding_requests
from llamaindex_core_ext.connection import CoreConnection


class CoreEmbedding(CoreConnection, BaseEmbedding):
    """Query and passage embeddings of the service.

    Args:
        model_name: the model family (default ``core-embedding-1-large``); ``-query`` and
            ``-passage`` are appended for queries and texts.
        embed_batch_size: texts per request, 1 to 100 (default 100).
        timeout, max_retries, api_key, base_url, backend: see ``CoreConnection``.
    """

    model_name: str = Field(
        default=DEFAULT_EMBEDDING_FAMILY,
        description="Model family; '-query' / '-passage' are appended per input type.",
    )
    embed_batch_size: int = Field(
        default=MAX_EMBEDDING_INPUTS,
        gt=0,
        le=MAX_EMBEDDING_INPUTS,
        description="Texts per request (the service takes at most 100).",
    )

    @field_validator("model_name")
    @classmethod
    def _family_name(cls, value: str) -> str:
        embedding_model(InputType.QUERY, value)  # raises for a model's name
        return value

    @classmethod
    def class_name(cls) -> str:
        return "CoreEmbedding"

    @property
    def query_model(self) -> str:
        return embedding_model(InputType.QUERY, self.model_name)

    @property
    def passage_model(self) -> str:
        return embedding_model(InputType.PASSAGE, self.model_name)

    # One path for both input types: only the model name differs.
    def _embed(self, texts: list[str], model: str) -> list[Embedding]:
        vectors: list[Embedding] = []
        for batch in plan_embedding_requests(texts, max_inputs=self.embed_batch_size):
            result = self.get_backend().embed({"model": model, "input": batch})
            vectors.extend(result.float_vectors(len(batch)))
        return vectors

    async def _aembed(self, texts: list[str], model: str) -> list[Embedding]:
        vectors: list[Embedding] = []
        for batch in plan_embedding_requests(texts, max_inputs=self.embed_batch_size):
            result = await self.get_backend().aembed({"model": model, "input": batch})
            vectors.extend(result.float_vectors(len(batch)))
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
