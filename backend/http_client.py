"""The HTTP backend: the same ``Backend`` interface, answered by a server over httpx.

>>> from backend.http_client import HTTPBackend
>>> with HTTPBackend("http://127.0.0.1:8000", api_key="...") as service:
...     service.chat({"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "Hi"}]})

Requests go out as given (pydantic models as ``model_dump(exclude_none=True)``): the server
validates, so its 400 messages are the single source. Failures raise the same typed errors as
the in-process backend (``backend.errors``). Connection errors, timeouts, 408, 409, 429 and 5xx
are retried ``max_retries`` times with exponential backoff and jitter (at most 8 s a wait),
honouring ``Retry-After``; a stream is never retried once its response has begun.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from backend.errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CoreError,
    InternalServerError,
    RateLimitError,
    ServiceUnavailableError,
    error_for_status,
)
from backend.interface import Backend, ChatRequestLike, EmbeddingRequestLike
from backend.schemas import ChatCompletion, ChatCompletionChunk, EmbeddingList, ModelList
from backend.sse import DONE, ServerSentEvent, aiter_events, iter_events

API_PATH = "/v1/core"
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
#: A ``Retry-After`` longer than this is not waited for; the usual backoff applies instead.
MAX_RETRY_AFTER = 60.0
_RETRY_STATUSES = frozenset({408, 409, 429})
#: Status for an ``{"error": ...}`` event inside a stream, which carries no status of its own.
_STATUS_BY_ERROR_TYPE = {
    cls.error_type: cls.status_code
    for cls in (
        InternalServerError,
        ServiceUnavailableError,
        RateLimitError,
        AuthenticationError,
        BadRequestError,
    )
} | {"timeout_error": 504}

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


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    try:
        return float(headers["retry-after-ms"]) / 1000
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def retry_delay(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number ``attempt + 1``."""
    if retry_after is not None and 0 <= retry_after <= MAX_RETRY_AFTER:
        return retry_after
    delay = min(INITIAL_RETRY_DELAY * 2**attempt, MAX_RETRY_DELAY)
    return delay * (1 - 0.25 * random.random())


def _retryable(error: CoreError) -> bool:
    if isinstance(error, APIConnectionError):
        return True
    status = error.status_code or 0
    return status in _RETRY_STATUSES or status >= 500


def _status_error(response: httpx.Response) -> APIStatusError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return error_for_status(response.status_code, body, retry_after=_retry_after(response.headers))


def _transport_error(exc: httpx.TransportError) -> APIConnectionError:
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"the request timed out ({type(exc).__name__})")
    return APIConnectionError(f"could not reach the server: {exc}")


def _parse(response: httpx.Response, model: type[ModelT]) -> ModelT:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise InternalServerError(
            f"the server answered with a body that is not a {model.__name__}"
        ) from exc


def _chunk_from_event(event: ServerSentEvent) -> ChatCompletionChunk | None:
    """The chunk an event carries; None at ``[DONE]``; raises on an error event."""
    if event.data == DONE:
        return None
    try:
        data = json.loads(event.data)
    except json.JSONDecodeError as exc:
        raise InternalServerError("the server sent a stream event that is not JSON") from exc
    if isinstance(data, dict) and "error" in data:
        error = data["error"] if isinstance(data["error"], dict) else {}
        status = _STATUS_BY_ERROR_TYPE.get(str(error.get("type")), 500)
        raise error_for_status(status, data)
    try:
        return ChatCompletionChunk.model_validate(data)
    except ValidationError as exc:
        raise InternalServerError("the server sent a stream event that is not a chunk") from exc


_TRUNCATED = "the server closed the stream before it was complete (no [DONE])"


class ChunkStream(Iterator[ChatCompletionChunk]):
    """The chunks of one streamed response; closes the response when done, failed or closed."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._events = iter_events(response.iter_bytes())
        self._closed = False

    def __iter__(self) -> ChunkStream:
        return self

    def __next__(self) -> ChatCompletionChunk:
        if self._closed:
            raise StopIteration
        try:
            event = next(self._events, None)
            if event is None:
                raise APIConnectionError(_TRUNCATED)
            chunk = _chunk_from_event(event)
        except httpx.TransportError as exc:
            self.close()
            raise _transport_error(exc) from exc
        except BaseException:
            self.close()
            raise
        if chunk is None:
            self.close()
            raise StopIteration
        return chunk

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._response.close()

    def __enter__(self) -> ChunkStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChunkStream(AsyncIterator[ChatCompletionChunk]):
    """The async twin of ``ChunkStream``."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._events = aiter_events(response.aiter_bytes())
        self._closed = False

    def __aiter__(self) -> AsyncChunkStream:
        return self

    async def __anext__(self) -> ChatCompletionChunk:
        if self._closed:
            raise StopAsyncIteration
        try:
            event = await anext(self._events, None)
            if event is None:
                raise APIConnectionError(_TRUNCATED)
            chunk = _chunk_from_event(event)
        except httpx.TransportError as exc:
            await self.aclose()
            raise _transport_error(exc) from exc
        except BaseException:
            await self.aclose()
            raise
        if chunk is None:
            await self.aclose()
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._response.aclose()

    async def __aenter__(self) -> AsyncChunkStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class HTTPBackend(Backend):
    """A ``Backend`` talking to a core-textmodels server (or any server of the same API).

    Args:
        base_url: ``http://host:port`` or ``http://host:port/v1/core``.
        api_key: the bearer key; None sends no Authorization header.
        timeout: seconds for each read, write and pool wait (and between stream events).
        connect_timeout: seconds to establish a connection.
        max_retries: retries after the first attempt; 0 means exactly one attempt.
        http_client / async_http_client: clients to use instead of the pooled ones this
            backend creates on first use; the caller keeps ownership and closes them.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries}")
        self.base_url = normalise_base_url(base_url)
        self.max_retries = max_retries
        self._api_key = api_key
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._client = http_client
        self._async_client = async_http_client
        self._owns_client = http_client is None
        self._owns_async_client = async_http_client is None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the key
        return f"HTTPBackend(base_url={self.base_url!r}, max_retries={self.max_retries})"

    # ------------------------------------------------------------------ clients

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "core-textmodels-python"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _sync_client(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self._timeout)
            return self._client

    def _async_http(self) -> httpx.AsyncClient:
        with self._lock:
            if self._async_client is None:
                self._async_client = httpx.AsyncClient(timeout=self._timeout)
            return self._async_client

    def close(self) -> None:
        """Close the sync client this backend created (``aclose`` closes both)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None and self._owns_client:
            client.close()

    async def aclose(self) -> None:
        with self._lock:
            client, self._async_client = self._async_client, None
        if client is not None and self._owns_async_client:
            await client.aclose()
        self.close()

    # ------------------------------------------------------------------ sending with retries

    def _send(
        self, method: str, path: str, body: Any = None, stream: bool = False
    ) -> httpx.Response:
        client = self._sync_client()
        request = client.build_request(
            method, self.base_url + path, json=body, headers=self._headers(), timeout=self._timeout
        )
        attempt = 0
        while True:
            cause: BaseException | None = None
            retry_after: float | None = None
            try:
                response = client.send(request, stream=stream)
            except httpx.TransportError as exc:
                cause, error = exc, _transport_error(exc)
            else:
                if response.is_success:
                    return response
                if stream:
                    response.read()
                response.close()
                error = _status_error(response)
                retry_after = _retry_after(response.headers)
            if attempt >= self.max_retries or not _retryable(error):
                raise error from cause
            time.sleep(retry_delay(attempt, retry_after))
            attempt += 1

    async def _asend(
        self, method: str, path: str, body: Any = None, stream: bool = False
    ) -> httpx.Response:
        client = self._async_http()
        request = client.build_request(
            method, self.base_url + path, json=body, headers=self._headers(), timeout=self._timeout
        )
        attempt = 0
        while True:
            cause: BaseException | None = None
            retry_after: float | None = None
            try:
                response = await client.send(request, stream=stream)
            except httpx.TransportError as exc:
                cause, error = exc, _transport_error(exc)
            else:
                if response.is_success:
                    return response
                if stream:
                    await response.aread()
                await response.aclose()
                error = _status_error(response)
                retry_after = _retry_after(response.headers)
            if attempt >= self.max_retries or not _retryable(error):
                raise error from cause
            await asyncio.sleep(retry_delay(attempt, retry_after))
            attempt += 1

    # ------------------------------------------------------------------ the interface

    def chat(self, request: ChatRequestLike) -> ChatCompletion:
        response = self._send("POST", "/chat/completions", _body(request, stream=False))
        return _parse(response, ChatCompletion)

    def stream_chat(self, request: ChatRequestLike) -> ChunkStream:
        """Open the stream now (4xx errors raise here), then iterate its chunks."""
        response = self._send("POST", "/chat/completions", _body(request, stream=True), stream=True)
        return ChunkStream(response)

    def embed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return _parse(self._send("POST", "/embeddings", _body(request)), EmbeddingList)

    def models(self) -> ModelList:
        return _parse(self._send("GET", "/models"), ModelList)

    async def achat(self, request: ChatRequestLike) -> ChatCompletion:
        response = await self._asend("POST", "/chat/completions", _body(request, stream=False))
        return _parse(response, ChatCompletion)

    async def astream_chat(self, request: ChatRequestLike) -> AsyncChunkStream:
        response = await self._asend(
            "POST", "/chat/completions", _body(request, stream=True), stream=True
        )
        return AsyncChunkStream(response)

    async def aembed(self, request: EmbeddingRequestLike) -> EmbeddingList:
        return _parse(await self._asend("POST", "/embeddings", _body(request)), EmbeddingList)
