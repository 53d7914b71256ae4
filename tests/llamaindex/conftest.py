"""Fixtures for the LlamaIndex adapter tests: a loopback-only network guard, recording
backends on the offline doubles, and LlamaIndex ``Settings`` pointed at our models."""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from backend.backends.local import InProcessBackend
from backend.interface import Backend, ChatRequestLike, EmbeddingRequestLike
from backend.protocol.schemas import ChatCompletion, ChatCompletionChunk, EmbeddingList
from backend.testing import CharCountEmbeddingEngine, ScriptedChatEngine


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(scope="module", autouse=True)
def _loopback_only() -> Iterator[None]:
    """Fail any connection beyond loopback: LlamaIndex must not fetch tokenizers, NLTK data
    or OpenAI defaults behind our back. Module-scoped, so module fixtures are guarded too."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            raise AssertionError(f"test tried to reach the network: {address!r}")

    def connect(sock: socket.socket, address: Any) -> None:
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        check(sock, address)
        return real_connect_ex(sock, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        yield


class RecordingBackend(Backend):
    """Delegates to another backend and keeps every request it was given."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.requests: list[dict[str, Any]] = []

    def _record(self, request: Any) -> Any:
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


@pytest.fixture
def scripted() -> Callable[..., RecordingBackend]:
    """Factory: a recording in-process backend on the offline doubles; the chat model always
    answers ``reply``."""

    def make(reply: str = "Hello there.") -> RecordingBackend:
        return RecordingBackend(
            InProcessBackend(
                profile="small",
                chat_engine_instance=ScriptedChatEngine(reply),
                embedding_engine_instance=CharCountEmbeddingEngine(),
            )
        )

    return make


@pytest.fixture(scope="module")
def li_settings(small_backend: InProcessBackend) -> Iterator[Any]:
    """LlamaIndex's global ``Settings`` with our LLM, embeddings and the chat model's own
    tokenizer (never tiktoken, never OpenAI), restored afterwards."""
    import llama_index.core
    from llama_index.core import Settings

    from llamaindex_core_ext import Core, CoreEmbedding

    saved = (Settings._llm, Settings._embed_model, llama_index.core.global_tokenizer)
    Settings.llm = Core(backend=small_backend, temperature=0.0, max_tokens=24)
    Settings.embed_model = CoreEmbedding(backend=small_backend)
    Settings.tokenizer = small_backend._chat.get().tokenizer
    try:
        yield Settings
    finally:
        Settings._llm, Settings._embed_model, llama_index.core.global_tokenizer = saved


# ---------------------------------------------------------------- a real server (HTTP tests)

HTTP_TEST_KEY = "li-test-key"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ready(base_url: str) -> bool:
    import httpx

    try:
        return bool(httpx.get(f"{base_url}/health", timeout=2).json().get("ready"))
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def http_base_url(small_backend: InProcessBackend) -> Iterator[str]:
    """A uvicorn server on 127.0.0.1 serving the shared small-profile backend."""
    if importlib.util.find_spec("uvicorn") is None:
        pytest.skip("uvicorn is not installed")
    import uvicorn

    from backend.server.app import create_app
    from backend.server.settings import ServerSettings

    app = create_app(small_backend, ServerSettings(api_keys=(HTTP_TEST_KEY,)))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while not (server.started and _ready(base_url)):
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield base_url
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            thread.join(timeout=10)


@pytest.fixture
def core_http_env(monkeypatch: pytest.MonkeyPatch, http_base_url: str) -> str:
    """``CORE_BASE_URL`` and ``CORE_API_KEY`` set for the test server, as a deployment would."""
    monkeypatch.setenv("CORE_BASE_URL", http_base_url)
    monkeypatch.setenv("CORE_API_KEY", HTTP_TEST_KEY)
    return http_base_url
