"""The one interface every front-end uses: the in-process engine and the HTTP client both
implement ``Backend``; the server, the CLI and the LangChain / LlamaIndex adapters sit on it."""

from __future__ import annotations

import abc
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from backend.catalogue import CATALOGUE
from backend.schemas import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    EmbeddingList,
    EmbeddingRequest,
    ModelList,
    ModelObject,
)

ChatRequestLike = ChatCompletionRequest | Mapping[str, Any]
EmbeddingRequestLike = EmbeddingRequest | Mapping[str, Any]


class Backend(abc.ABC):
    """Chat (and groundedness), streaming chat and embeddings, sync and async.

    A request is a request model or the JSON-shaped dict the HTTP API takes; results are the
    response models. Failures raise ``backend.errors.CoreError`` subclasses carrying the HTTP
    status and the spec's error object. ``stream`` in a request is ignored: the method decides.
    """

    @abc.abstractmethod
    def chat(self, request: ChatRequestLike) -> ChatCompletion: ...

    @abc.abstractmethod
    def stream_chat(self, request: ChatRequestLike) -> Iterator[ChatCompletionChunk]:
        """Validate the request at once (errors raise here), then return the chunk iterator."""

    @abc.abstractmethod
    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList: ...

    @abc.abstractmethod
    async def achat(self, request: ChatRequestLike) -> ChatCompletion: ...

    @abc.abstractmethod
    async def astream_chat(self, request: ChatRequestLike) -> AsyncIterator[ChatCompletionChunk]:
        """Validate the request (errors raise when awaited), then return the chunk iterator."""

    @abc.abstractmethod
    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList: ...

    def models(self) -> ModelList:
        """The model catalogue (spec 2.1) in OpenAI's list shape."""
        return catalogue_model_list()

    def close(self) -> None:
        """Release connections or models; the backend is unusable afterwards."""

    async def aclose(self) -> None:
        self.close()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Backend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def catalogue_model_list() -> ModelList:
    return ModelList(
        data=[
            ModelObject(
                id=card.name,
                created=int(time.mktime(card.release_date.timetuple())),
                operation=card.operation.value,
                status=card.status,  # type: ignore[arg-type]
                release_date=card.release_date.isoformat(),
                context_length=card.context_length,
                version=card.version,
                deprecation_date=card.deprecation_date.isoformat()
                if card.deprecation_date
                else None,
                replaced_by=card.replaced_by,
            )
            for card in CATALOGUE
        ]
    )
