"""``CoreEmbeddings``: the query/passage embedding models as LangChain ``Embeddings``.

Like langchain-upstage, ``embed_query`` uses the ``-query`` model and ``embed_documents``
the ``-passage`` model; both share one vector space. Any number of documents is split into
requests within the service's limits (spec 8, ``backend.protocol.limits``), in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langchain_core.embeddings import Embeddings
from pydantic import Field

from backend.protocol.catalogue import DEFAULT_EMBEDDING_FAMILY, InputType, embedding_model
from backend.protocol.limits import plan_embedding_requests
from langchain_core_ext.connection import CoreConnection


class CoreEmbeddings(CoreConnection, Embeddings):
    """Query and passage embeddings from the core service.

    Example:
        >>> from langchain_core_ext import CoreEmbeddings
        >>> embeddings = CoreEmbeddings()          # in-process, or CORE_BASE_URL
        >>> vector = embeddings.embed_query("What is the capital of France?")

    Args (besides the connection settings of ``CoreConnection``):
        model: the model family; ``-query`` and ``-passage`` are appended.
        show_progress: a tqdm progress bar over the requests of ``embed_documents``.
    """

    model: str = Field(
        default=DEFAULT_EMBEDDING_FAMILY,
        description="Model family: embed_query uses MODEL-query, embed_documents MODEL-passage.",
    )
    show_progress: bool = Field(default=False, description="Show a tqdm bar for long lists.")

    @property
    def query_model(self) -> str:
        return embedding_model(InputType.QUERY, self.model)

    @property
    def passage_model(self) -> str:
        return embedding_model(InputType.PASSAGE, self.model)

    def _requests(self, texts: Sequence[str]) -> Iterable[list[str]]:
        requests = plan_embedding_requests(texts)
        if not self.show_progress:
            return requests
        from tqdm.auto import tqdm

        return tqdm(requests, desc=f"Embedding {len(texts)} texts", unit="request")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Passage vectors, one per text in order, in as many requests as the limits need."""
        service = self._get_backend()
        vectors: list[list[float]] = []
        for request in self._requests(texts):
            response = service.embed({"model": self.passage_model, "input": request})
            vectors.extend(response.float_vectors(len(request)))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The query vector of ``text``."""
        response = self._get_backend().embed({"model": self.query_model, "input": text})
        return response.float_vectors(1)[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        service = self._get_backend()
        vectors: list[list[float]] = []
        for request in self._requests(texts):
            response = await service.aembed({"model": self.passage_model, "input": request})
            vectors.extend(response.float_vectors(len(request)))
        return vectors

    async def aembed_query(self, text: str) -> list[float]:
        response = await self._get_backend().aembed({"model": self.query_model, "input": text})
        return response.float_vectors(1)[0]
