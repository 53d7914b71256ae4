"""The async methods' model work runs in threads that do not cap how many requests run
together (asyncio's default executor has min(32, cores + 4) threads; a stream holds one for
its whole length), and a stream's producer runs only so far ahead of its reader."""

from __future__ import annotations

import asyncio
import threading

from backend.backends.local.threads import STREAM_AHEAD, iterate_in_thread, run_in_thread
from tests.waiting import HANG_GUARD_S

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


def test_a_streams_producer_waits_for_its_reader_and_ends_when_the_reader_leaves():
    produced = 0
    closed = threading.Event()
    waiting = threading.Event()  # the producer made all it may before the reader reads on

    def produce():
        nonlocal produced
        try:
            while True:
                produced += 1
                # Read one, hand over STREAM_AHEAD more, and one more made before the wait.
                if produced == STREAM_AHEAD + 2:
                    waiting.set()
                yield produced
        finally:
            closed.set()

    async def read_one_and_leave() -> int:
        stream = iterate_in_thread(produce, threading.Event())
        first = await anext(stream)
        assert await asyncio.to_thread(waiting.wait, HANG_GUARD_S)
        await stream.aclose()
        return first

    assert asyncio.run(read_one_and_leave()) == 1
    # However long the reader took, the producer went no further, and it was closed.
    assert closed.is_set() and produced == STREAM_AHEAD + 2
