"""What the endpoints share: the backend, settings, lifecycle, limiter and metrics of one app."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from backend.interface import Backend
from backend.server.errors import RequestTimeoutError
from backend.server.lifecycle import Lifecycle
from backend.server.limiter import ConcurrencyLimiter, StreamSlots
from backend.server.metrics import ServerMetrics
from backend.server.settings import ServerSettings

T = TypeVar("T")


@dataclass
class ServerContext:
    backend: Backend
    settings: ServerSettings
    lifecycle: Lifecycle
    limiter: ConcurrencyLimiter
    streams: StreamSlots
    metrics: ServerMetrics = field(default_factory=ServerMetrics)

    @classmethod
    def create(cls, backend: Backend, settings: ServerSettings) -> ServerContext:
        context = cls(
            backend=backend,
            settings=settings,
            lifecycle=Lifecycle(backend, retry_after=settings.retry_after),
            limiter=ConcurrencyLimiter(
                settings.max_concurrent, settings.max_queued, retry_after=settings.retry_after
            ),
            streams=StreamSlots(settings.max_concurrent_streams, retry_after=settings.retry_after),
        )
        context.metrics.watch_load(lambda: context.limiter.active, lambda: context.limiter.queued)
        return context

    def deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.settings.request_timeout

    async def admit(self, deadline: float) -> None:
        """Check the server takes model work, then take a model place (caller releases it).

        Raises:
            ServiceUnavailableError: loading or draining (503).
            RateLimitError: the queue is full (429).
            RequestTimeoutError: no place came free before ``deadline``.
        """
        self.lifecycle.check_accepting()
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            await asyncio.wait_for(self.limiter.acquire(), remaining)
        except asyncio.TimeoutError as exc:
            raise RequestTimeoutError(
                "the request waited for a model place past the server's request timeout"
            ) from exc

    async def run_model(
        self, work: Callable[[], Awaitable[T]], deadline: float, *, keep_place: bool = False
    ) -> T:
        """Take a place, run ``work()`` within ``deadline``, and give the place back.

        With ``keep_place`` the place stays taken after success (a stream holds it until it
        ends; the caller releases it). Model work runs in a thread that cannot be interrupted:
        if the caller stops waiting (timeout, cancellation) the place is given back only when
        that thread is done, so the bound on concurrent model work holds.
        """
        await self.admit(deadline)
        task = asyncio.ensure_future(work())
        succeeded = False
        try:
            remaining = deadline - asyncio.get_running_loop().time()
            result = await asyncio.wait_for(asyncio.shield(task), max(remaining, 0))
            succeeded = True
            return result
        except asyncio.TimeoutError as exc:
            raise RequestTimeoutError("the request ran past the server's request timeout") from exc
        finally:
            if not task.done():
                task.add_done_callback(self._release_after)
            elif not (keep_place and succeeded):
                self.limiter.release()

    def _release_after(self, task: asyncio.Future[object]) -> None:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved
        self.limiter.release()
