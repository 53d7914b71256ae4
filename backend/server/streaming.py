"""Chat chunks as server-sent events.

Each chunk goes out as ``data: {json}``, then ``data: [DONE]``. While the model has produced
nothing for ``keep_alive_interval`` seconds a ``: keep-alive`` comment goes out so proxies keep
the connection. An error after the first byte cannot change the status any more: it goes out as
one ``data: {"error": {...}}`` event and the stream ends without ``[DONE]``. When the client
goes away the response task is cancelled; closing the chunk iterator then stops generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from backend.interface import AsyncChatStream
from backend.protocol.schemas import ChatCompletionChunk
from backend.protocol.sse import DONE, KEEP_ALIVE, encode_event
from backend.server.errors import RequestTimeoutError, to_core_error
from backend.server.metrics import ServerMetrics

#: Seconds a closing stream waits for the model thread to stop.
_CLEANUP_TIMEOUT = 5.0


async def chunk_events(
    chunks: AsyncChatStream,
    *,
    scope: Scope,
    metrics: ServerMetrics,
    keep_alive_interval: float,
    deadline: float,
    send_usage: bool,
    started: float,
) -> AsyncIterator[bytes]:
    """Encode ``chunks`` as SSE bytes; see the module docstring.

    Args:
        send_usage: whether the client asked for the usage chunk; the server always asks the
            backend for it, to count tokens, and drops it here when the client did not.
        deadline: ``loop.time()`` after which the stream ends with a timeout error event.
        started: ``time.perf_counter()`` at request start, for the time-to-first-token metric.
    """
    loop = asyncio.get_running_loop()
    pending: asyncio.Future[ChatCompletionChunk] | None = None
    first_content = True
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(chunks))
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimeoutError("the stream ran past the server's request timeout")
            done, _ = await asyncio.wait({pending}, timeout=min(keep_alive_interval, remaining))
            if not done:
                yield KEEP_ALIVE
                continue
            finished, pending = pending, None
            try:
                chunk = finished.result()
            except StopAsyncIteration:
                break
            if chunk.usage is not None:
                metrics.count_tokens(
                    chunk.model, chunk.usage.prompt_tokens, chunk.usage.completion_tokens
                )
                if not send_usage:
                    continue
            elif first_content and any(
                c.delta.content or c.delta.tool_calls for c in chunk.choices
            ):
                first_content = False
                metrics.time_to_first_token.labels(model=chunk.model).observe(
                    time.perf_counter() - started
                )
            yield encode_event(chunk.model_dump_json())
        yield encode_event(DONE)
    except Exception as exc:  # noqa: BLE001 - the status is sent; the error goes in the stream
        yield encode_event(to_core_error(exc, scope).body.model_dump_json())
    finally:
        # Shielded: a cancelled response (client gone) must still stop the generation and
        # wait for the model thread to let go, within a bound.
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_TIMEOUT):
            if pending is not None:
                pending.cancel()  # throws into the backend iterator, which stops generation
                with contextlib.suppress(BaseException):
                    await pending
            with contextlib.suppress(Exception):
                await chunks.aclose()


class EventStreamResponse(StreamingResponse):
    """A ``text/event-stream`` response that always runs ``on_close`` once it is over.

    ``on_close`` runs whether the stream ended, failed, was cancelled or never started, so the
    model place it holds is always given back.
    """

    media_type = "text/event-stream"

    def __init__(self, events: AsyncGenerator[bytes, None], on_close: Callable[[], Any]) -> None:
        super().__init__(events, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._events = events
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                await self._events.aclose()
            finally:
                self._on_close()
