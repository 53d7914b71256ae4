"""Test doubles for the LangChain adapter tests: a backend that records its requests, and an
in-process backend on the offline scripted engines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from pydantic import BaseModel

from backend.inprocess import InProcessBackend
from backend.interface import Backend, ChatRequestLike, EmbeddingRequestLike
from backend.schemas import ChatCompletion, ChatCompletionChunk, EmbeddingList
from tests.fakes import CharCountEmbeddingEngine, ScriptedChatEngine

#: The key the test servers accept.
TEST_API_KEY = "lc-test-key"


class RecordingBackend(Backend):
    """Delegates to another backend and keeps every request it was given."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.requests: list[dict[str, Any]] = []

    def _record(self, request: Any) -> Any:
        # The server hands over parsed request models; keep what the client sent.
        if isinstance(request, BaseModel):
            self.requests.append(request.model_dump(exclude_unset=True))
        else:
            self.requests.append(dict(request))
        return request

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        return self.inner.chat(self._record(request))

    def stream_chat(self, request: ChatRequestLike) -> Iterator[ChatCompletionChunk]:
        return self.inner.stream_chat(self._record(request))

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return self.inner.embed(self._record(request))

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        return await self.inner.achat(self._record(request))

    async def astream_chat(self, request: ChatRequestLike) -> AsyncIterator[ChatCompletionChunk]:
        return await self.inner.astream_chat(self._record(request))

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return await self.inner.aembed(self._record(request))


def scripted_inprocess(reply: str = "Hello there.") -> InProcessBackend:
    """An in-process backend on the offline doubles: every chat answer is ``reply``."""
    return InProcessBackend(
        profile="small",
        chat_engine=ScriptedChatEngine(reply),
        embedding_engine=CharCountEmbeddingEngine(),
    )
