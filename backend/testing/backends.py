"""Backends for tests: one that records what it is asked, one that answers nothing, one whose
loading waits for the test, and the in-process backend on the offline engines of
``backend.testing.engines``."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel

from backend.backends.local import InProcessBackend
from backend.engines.base import ChatEngine
from backend.interface import (
    AsyncChatStream,
    Backend,
    BackendProxy,
    ChatRequestLike,
    ChatStream,
    EmbeddingRequestLike,
)
from backend.protocol.schemas import ChatCompletion, EmbeddingList
from backend.testing.engines import CharCountEmbeddingEngine, ScriptedChatEngine


def offline_backend(
    chat_engine_instance: ChatEngine | None = None, profile: str = "small"
) -> InProcessBackend:
    """The in-process backend on the offline doubles: ``chat_engine_instance`` (default a
    ``ScriptedChatEngine``) and the letter-counting embedding engine, with the rules of model
    profile ``profile``."""
    return InProcessBackend(
        profile=profile,
        chat_engine_instance=chat_engine_instance or ScriptedChatEngine(),
        embedding_engine_instance=CharCountEmbeddingEngine(),
    )


def scripted_backend(reply: str = "Hello there.", **engine_options: Any) -> InProcessBackend:
    """The in-process backend on the offline doubles: every chat answer is ``reply``."""
    return offline_backend(ScriptedChatEngine(reply, **engine_options))


class RecordingBackend(BackendProxy):
    """Hands every call to ``inner`` and keeps each request as the caller sent it
    (``requests``, JSON-shaped dicts)."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.requests: list[dict[str, Any]] = []

    def _record(self, request: Any) -> Any:
        # The server hands over parsed request models; keep what the client sent.
        if isinstance(request, BaseModel):
            self.requests.append(request.model_dump(exclude_unset=True))
        else:
            self.requests.append(dict(request))
        return request

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        return super().chat(self._record(request))

    def stream_chat(self, request: ChatRequestLike) -> ChatStream:
        return super().stream_chat(self._record(request))

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return super().embed(self._record(request))

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        return await super().achat(self._record(request))

    async def astream_chat(self, request: ChatRequestLike) -> AsyncChatStream:
        return await super().astream_chat(self._record(request))

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return await super().aembed(self._record(request))


class GatedWarmupBackend(BackendProxy):
    """Hands every call to ``inner`` (default: the scripted offline backend), but ``warmup``
    waits until the test sets ``release`` (at most ``timeout`` seconds), then loads, or with
    ``fail`` raises: a server on it stays loading for as long as the test needs."""

    def __init__(
        self, inner: Backend | None = None, *, fail: bool = False, timeout: float = 30.0
    ) -> None:
        super().__init__(inner or offline_backend())
        self.release = threading.Event()
        self.fail = fail
        self.timeout = timeout

    def warmup(self) -> None:
        self.release.wait(self.timeout)
        if self.fail:
            raise RuntimeError("weights missing")
        super().warmup()


class StubBackend(Backend):
    """A backend that answers nothing: subclasses override the methods a test uses."""

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        raise NotImplementedError

    def stream_chat(self, request: ChatRequestLike) -> ChatStream:
        raise NotImplementedError

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        raise NotImplementedError

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        raise NotImplementedError

    async def astream_chat(self, request: ChatRequestLike) -> AsyncChatStream:
        raise NotImplementedError

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        raise NotImplementedError
