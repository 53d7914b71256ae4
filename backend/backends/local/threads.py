"""Running blocking model work off the event loop, and building things once on first use.

The async methods of the in-process backend must never block the loop: each call runs in a
worker thread, and a stream is produced by a thread and consumed through an asyncio queue.
Cancelling the consumer (a client that went away) sets the stop flag the producer polls
before each token, so generation ends within one decoding step.
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
    can end; the generator is closed in its own thread either way.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()

    def produce() -> None:
        iterator = make_iterator()
        try:
            for item in iterator:
                loop.call_soon_threadsafe(queue.put_nowait, item)
                if stop.is_set():
                    break
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
            yield item  # type: ignore[misc]
    finally:
        stop.set()
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
