"""The HTTP backend: the same ``Backend`` interface, answered by a server over httpx.

>>> from backend.backends.client import HTTPBackend
>>> with HTTPBackend("http://127.0.0.1:8000", api_key="...") as service:
...     service.chat({"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "Hi"}]})

Requests go out as given (pydantic models as ``model_dump(exclude_none=True)``): the server
validates, so its 400 messages are the single source. Failures raise the same typed errors as
the in-process backend (``backend.protocol.errors``). Failed attempts are retried
``max_retries`` times (``backend.backends.client.transport``); a stream is never retried once its
response has begun (``backend.backends.client.streams``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from backend.backends.client.streams import async_chunk_stream, chunk_stream
from backend.backends.client.transport import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    RetryingTransport,
    TransportOptions,
)
from backend.interface import (
    AsyncChatStream,
    Backend,
    ChatRequestLike,
    ChatStream,
    EmbeddingRequestLike,
    ReportRequestLike,
)
from backend.protocol.catalogue import DEFAULT_CHAT_MODEL
from backend.protocol.errors import InternalServerError, NotImplementedByBackendError
from backend.protocol.groundedness_report import GroundednessReport
from backend.protocol.schemas import ChatCompletion, EmbeddingList, ModelList
from backend.protocol.tokenize import COUNTED_CHAT_FIELDS, TokenizeRequest, TokenizeResponse

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's own from Python 3.11

API_PATH = "/v1/core"
REPORT_PATH = "/groundedness/report"
__all__ = ["DEFAULT_MAX_RETRIES", "DEFAULT_TIMEOUT", "HTTPBackend", "normalise_base_url"]

ModelT = TypeVar("ModelT", bound=BaseModel)


def normalise_base_url(base_url: str) -> str:
    """``http://host:port``, ``.../v1`` or ``.../v1/core`` (slash or not) -> ``.../v1/core``."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
    if url.endswith(API_PATH):
        return url
    if url.endswith("/v1"):
        return url + "/core"
    return url + API_PATH


def _body(request: Any, **fields: Any) -> Any:
    if isinstance(request, BaseModel):
        body: Any = request.model_dump(mode="json", exclude_none=True)
    elif isinstance(request, Mapping):
        body = dict(request)
    else:
        return request  # sent as is: the server answers with the 400 it deserves
    body.update(fields)
    return body


def _parse(response: httpx.Response, model: type[ModelT]) -> ModelT:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise InternalServerError(
            f"the server answered with a body that is not a {model.__name__}"
        ) from exc


class HTTPBackend(Backend):
    """A ``Backend`` talking to a core-textmodels server (or any server of the same API).

    Args:
        base_url: ``http://host:port`` or ``http://host:port/v1/core``.
        api_key: the bearer key; None sends no Authorization header.
        **options: the transport's, with its defaults (``backend.backends.client.transport``):
            ``timeout`` (seconds for each read, write and pool wait, and between stream
            events), ``connect_timeout``, ``max_retries`` (after the first attempt) and
            ``http_client`` / ``async_http_client`` (clients to use instead of the pooled
            ones created on first use; the caller keeps ownership and closes them).
    """

    def __init__(
        self, base_url: str, api_key: str | None = None, **options: Unpack[TransportOptions]
    ) -> None:
        self._transport = RetryingTransport(normalise_base_url(base_url), api_key, **options)
        self.base_url = self._transport.base_url
        self.max_retries = self._transport.max_retries
        self._send = self._transport.send
        self._asend = self._transport.asend

    def __repr__(self) -> str:  # never shows the key
        return f"HTTPBackend(base_url={self.base_url!r}, max_retries={self.max_retries})"

    def close(self) -> None:
        """Close the sync client this backend created (``aclose`` closes both)."""
        self._transport.close()

    async def aclose(self) -> None:
        await self._transport.aclose()

    # ------------------------------------------------------------------ the interface

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        response = self._send("POST", "/chat/completions", _body(request, stream=False))
        return _parse(response, ChatCompletion)

    def stream_chat(self, request: ChatRequestLike) -> ChatStream:
        """Open the stream now (4xx errors raise here), then iterate its chunks."""
        response = self._send("POST", "/chat/completions", _body(request, stream=True), stream=True)
        return chunk_stream(response)

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return _parse(self._send("POST", "/embeddings", _body(request)), EmbeddingList)

    def models(self) -> ModelList:
        return _parse(self._send("GET", "/models"), ModelList)

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        response = await self._asend("POST", "/chat/completions", _body(request, stream=False))
        return _parse(response, ChatCompletion)

    async def astream_chat(self, request: ChatRequestLike) -> AsyncChatStream:
        response = await self._asend(
            "POST", "/chat/completions", _body(request, stream=True), stream=True
        )
        return async_chunk_stream(response)

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return _parse(await self._asend("POST", "/embeddings", _body(request)), EmbeddingList)

    def groundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        """The server's ``/groundedness/report``."""
        return _parse(self._send("POST", REPORT_PATH, _body(request)), GroundednessReport)

    async def agroundedness_report(self, request: ReportRequestLike) -> GroundednessReport:
        response = await self._asend("POST", REPORT_PATH, _body(request))
        return _parse(response, GroundednessReport)

    # ------------------------------------------------------------------ token counts

    def count_tokens(self, request: TokenizeRequest | Mapping[str, Any]) -> TokenizeResponse:
        return _parse(self._send("POST", "/tokenize", _body(request)), TokenizeResponse)

    def tokenize(self, text: str) -> list[int]:
        """The chat model's token ids for ``text``, from the server's ``/tokenize``.

        Raises:
            NotImplementedError: the server cannot count (it fronts an engine).
        """
        answer = self._counted({"model": DEFAULT_CHAT_MODEL, "input": text})
        return answer.tokens or []

    def count_prompt_tokens(self, request: ChatRequestLike) -> int:
        """A chat request's prompt tokens as the server's model reads them (``/tokenize``)."""
        body = _body(request)
        fields = ("model", *COUNTED_CHAT_FIELDS)
        return self._counted({k: body[k] for k in fields if k in body}).count

    def _counted(self, body: dict[str, Any]) -> TokenizeResponse:
        try:
            return self.count_tokens(body)
        except NotImplementedByBackendError as exc:
            raise NotImplementedError(exc.message) from exc
