"""Combining concurrent requests into one model batch (embeddings across requests).

An encoder embeds 64 short texts in one forward pass far faster than in 16 passes of four:
the matmuls are larger and the per-call overhead is paid once. When requests arrive while the
model is busy, they wait; whoever gets the model next runs everything that waited, as one
batch. A lone request runs at once, so batching adds no latency when there is no queue.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


@dataclass
class _Job(Generic[ItemT, ResultT]):
    item: ItemT
    size: int
    result: ResultT | None = None
    error: BaseException | None = None
    done: bool = False


class CombiningRunner(Generic[ItemT, ResultT]):
    """Runs submitted items in combined batches, one batch at a time.

    Args:
        run_batch: runs several items at once and returns one result per item, in order.
        max_batch_size: cap on the summed ``size`` of the items in one batch (a single larger
            item still runs, alone).
    """

    def __init__(
        self,
        run_batch: Callable[[Sequence[ItemT]], Sequence[ResultT]],
        max_batch_size: int,
    ) -> None:
        self._run_batch = run_batch
        self._max_batch_size = max_batch_size
        self._pending: list[_Job[ItemT, ResultT]] = []
        self._pending_lock = threading.Lock()
        #: Held while the model runs.
        self._model_lock = threading.Lock()

    def submit(self, item: ItemT, size: int = 1) -> ResultT:
        """Run ``item`` (alone or with others waiting now) and return its result."""
        job: _Job[ItemT, ResultT] = _Job(item, size)
        with self._pending_lock:
            self._pending.append(job)
        with self._model_lock:
            # An earlier holder may have run this job with its batch while we waited.
            while not job.done:
                self._run(self._take_batch())
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[return-value]

    def _take_batch(self) -> list[_Job[ItemT, ResultT]]:
        """The oldest waiting jobs that fit ``max_batch_size`` together (at least one)."""
        with self._pending_lock:
            taken, total = [], 0
            while self._pending:
                size = self._pending[0].size
                if taken and total + size > self._max_batch_size:
                    break
                taken.append(self._pending.pop(0))
                total += size
            return taken

    def _run(self, batch: list[_Job[ItemT, ResultT]]) -> None:
        try:
            results = self._run_batch([job.item for job in batch])
            for job, result in zip(batch, results, strict=True):
                job.result = result
        except Exception as error:  # noqa: BLE001 - any model failure, contained per request
            if len(batch) == 1:
                batch[0].error = error
            else:
                # One bad item must not fail the requests it happened to share a batch
                # with: run each alone, so the error reaches only its own request.
                for job in batch:
                    self._run([job])
        except BaseException as error:  # KeyboardInterrupt, SystemExit: everyone stops
            for job in batch:
                job.error = job.error or error
            raise
        finally:
            for job in batch:
                job.done = True
