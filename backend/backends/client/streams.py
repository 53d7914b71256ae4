"""A streamed response read as chat chunks: server-sent events decoded, ``[DONE]`` ending the
stream, an ``{"error": ...}`` event raised as the typed error it describes, and the response
closed when the stream ends, fails or is closed. A stream is never retried once begun."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
from pydantic import ValidationError

from backend.backends.client.retries import transport_error
from backend.interface import AsyncChatStream, ChatStream
from backend.protocol.errors import (
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    InternalServerError,
    RateLimitError,
    ServiceUnavailableError,
    error_for_status,
)
from backend.protocol.schemas import ChatCompletionChunk
from backend.protocol.sse import DONE, ServerSentEvent, aiter_events, iter_events

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
_TRUNCATED = "the server closed the stream before it was complete (no [DONE])"


def chunk_from_event(event: ServerSentEvent) -> ChatCompletionChunk | None:
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


def chunk_stream(response: httpx.Response) -> ChatStream:
    """The chunks of a streamed response; closing the stream closes the response."""

    def chunks() -> Iterator[ChatCompletionChunk]:
        try:
            for event in iter_events(response.iter_bytes()):
                chunk = chunk_from_event(event)
                if chunk is None:
                    return
                yield chunk
        except httpx.TransportError as exc:
            raise transport_error(exc) from exc
        raise APIConnectionError(_TRUNCATED)

    return ChatStream(chunks(), on_close=response.close)


def async_chunk_stream(response: httpx.Response) -> AsyncChatStream:
    """The async twin of ``chunk_stream``."""

    async def chunks() -> AsyncIterator[ChatCompletionChunk]:
        try:
            async for event in aiter_events(response.aiter_bytes()):
                chunk = chunk_from_event(event)
                if chunk is None:
                    return
                yield chunk
        except httpx.TransportError as exc:
            raise transport_error(exc) from exc
        raise APIConnectionError(_TRUNCATED)

    return AsyncChatStream(chunks(), on_close=response.aclose)
