"""Running blocking model work off the event loop, and building things once on first use.

The async methods of the in-process backend must never block the loop: each call runs in a
worker thread, and a stream is produced by a thread and consumed through an asyncio queue.
Cancelling the consumer (a client that went away) sets the stop flag the producer polls
before each token, so generation ends within one decoding step. The producer runs at most
``STREAM_AHEAD`` items ahead of its consumer: a reader that is slow, or that leaves after its
first chunk, does not let the producer run on to the end of the answer unread (an engine
generating in the producer's own thread, as the scripted test engine does, once generated a
whole 2,000-token answer before a loaded machine's event loop closed the stream).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import AsyncIterator, Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_DONE = object()

#: Most threads running model work for the async methods at once. Not asyncio's default
#: executor, whose min(32, cores + 4) threads (6 on 2 cores, 20 on a 16-core GPU machine)
#: would cap how many requests run together below the engine's batch and the server's
#: limits, since a stream holds its thread until it ends (benchmarks/README.md). Threads start
#: only as work arrives; the server's limiter and the engine's slots bound the work itself.
MODEL_WORK_THREADS = 1024
_model_work = ThreadPoolExecutor(MODEL_WORK_THREADS, thread_name_prefix="core-model-work")
#: Items a stream's producer may hand over before its consumer has taken them: a few steps
#: of a decode batch's worth of chunks, far fewer than an answer's tokens.
STREAM_AHEAD = 64


async def run_in_thread(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in a model-work thread, awaited (``asyncio.to_thread``, without
    the default executor's cap)."""
    call = functools.partial(contextvars.copy_context().run, function, *args)
    return await asyncio.get_running_loop().run_in_executor(_model_work, call)


async def iterate_in_thread(
    make_iterator: Callable[[], Generator[T, None, None]], stop: threading.Event
) -> AsyncIterator[T]:
    """Drive ``make_iterator()`` in a worker thread and yield its items here.

    ``stop`` is set when the consumer stops early, so the generator (which should poll it)
    can end; the generator is closed in its own thread either way. The producer waits while
    ``STREAM_AHEAD`` items are untaken.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    room = threading.Semaphore(STREAM_AHEAD)  # items the producer may still hand over

    def produce() -> None:
        iterator = make_iterator()
        try:
            for item in iterator:
                room.acquire()
                if stop.is_set():
                    break
                loop.call_soon_threadsafe(queue.put_nowait, item)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            iterator.close()
            loop.call_soon_threadsafe(queue.put_nowait, _DONE)

    worker = loop.run_in_executor(_model_work, produce)
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            room.release()
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        room.release()  # a producer waiting for room wakes, sees the stop and ends
        await asyncio.shield(worker) if not worker.done() else None


class Lazy(Generic[T]):
    """A value built on first use, once, whichever thread asks first."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._value is not None

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
        return self._value
