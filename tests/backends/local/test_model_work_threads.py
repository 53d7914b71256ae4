"""The async methods' model work runs in threads that do not cap how many requests run
together (asyncio's default executor has min(32, cores + 4) threads; a stream holds one for
its whole length)."""

from __future__ import annotations

import asyncio
import threading

from backend.backends.local.threads import iterate_in_thread, run_in_thread

#: More than the default executor's threads on any machine.
TOGETHER = 40


def test_calls_run_together_beyond_the_default_executors_threads():
    barrier = threading.Barrier(TOGETHER, timeout=60)

    async def main() -> list[int]:
        return await asyncio.gather(*(run_in_thread(barrier.wait) for _ in range(TOGETHER)))

    # Each call returns only once all of them are waiting at the barrier at the same time.
    assert sorted(asyncio.run(main())) == list(range(TOGETHER))


def test_streams_run_together_beyond_the_default_executors_threads():
    barrier = threading.Barrier(TOGETHER, timeout=60)

    def produce():
        yield barrier.wait()
        yield "after"

    async def read() -> list:
        return [item async for item in iterate_in_thread(produce, threading.Event())]

    async def main() -> list[list]:
        return await asyncio.gather(*(read() for _ in range(TOGETHER)))

    assert all(items[1] == "after" for items in asyncio.run(main()))
