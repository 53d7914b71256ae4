"""Bounding model work: a fixed number of requests run, a bounded queue waits, the rest get 429.

Places are handed over first come, first served. A waiter that gives up (timeout, client gone)
leaves the queue, and a place handed to it at that moment goes on to the next waiter.
"""

from __future__ import annotations

import asyncio
from collections import deque

from backend.protocol.errors import RateLimitError


class ConcurrencyLimiter:
    """At most ``max_concurrent`` holders and ``max_queued`` waiters; one event loop only."""

    def __init__(self, max_concurrent: int, max_queued: int, retry_after: float) -> None:
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self.retry_after = retry_after
        self._active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def active(self) -> int:
        return self._active

    @property
    def queued(self) -> int:
        return len(self._waiters)

    async def acquire(self) -> None:
        """Take a place, waiting in the queue if need be.

        Raises:
            RateLimitError: every place is taken and the queue is full.
        """
        if self._active < self.max_concurrent and not self._waiters:
            self._active += 1
            return
        if len(self._waiters) >= self.max_queued:
            raise RateLimitError(
                f"too many requests: {self.max_concurrent} model requests are running and "
                f"{len(self._waiters)} are waiting; retry later",
                retry_after=self.retry_after,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():
                self.release()  # the place was handed over as we gave up: pass it on
            raise

    def release(self) -> None:
        """Give a place back: to the longest waiter, else to the pool."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the place moves on; ``active`` stays the same
                return
        self._active -= 1


class StreamSlots:
    """At most ``limit`` streams open at once, waiting for a model place or sending; beyond: 429.

    A stream holds a connection and a model place for as long as the client reads, so an
    operator may allow fewer streams than model requests in all.
    """

    def __init__(self, limit: int, retry_after: float) -> None:
        self.limit = limit
        self.retry_after = retry_after
        self._open = 0

    @property
    def open(self) -> int:
        return self._open

    def take(self) -> None:
        """Count one more open stream (the caller gives it back).

        Raises:
            RateLimitError: ``limit`` streams are open.
        """
        if self._open >= self.limit:
            raise RateLimitError(
                f"too many streams: {self._open} are open, the most this server allows; "
                "retry later or ask without stream",
                retry_after=self.retry_after,
            )
        self._open += 1

    def give_back(self) -> None:
        self._open -= 1
