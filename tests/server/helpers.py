"""Test helpers for the server suite: a scripted engine that is slow, waits for a gate, counts
its tokens or fails on demand, and a second accepted key."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Sequence

from backend.engines.base import SamplingParams
from backend.testing import ScriptedChatEngine
from backend.testing.servers import TEST_API_KEY
from tests.waiting import HANG_GUARD_S

API_KEY = TEST_API_KEY
OTHER_KEY = "second-key-abcdef"


class SlowChatEngine(ScriptedChatEngine):
    """A scripted engine that can wait for a gate, sleeps before each token, can fail after
    some tokens, and records how many tokens it produced (``generated``).

    With ``hold_after``, it stops producing after that many tokens until it is asked to
    stop, so it can end early only by being stopped: a test of stopping then waits for that
    state, not for a time within which the whole reply would have been written.
    """

    def __init__(
        self,
        reply: str = "x" * 400,
        delay: float = 0.0,
        first_delay: float = 0.0,
        fail_after: int | None = None,
        gate: threading.Event | None = None,
        hold_after: int | None = None,
    ) -> None:
        super().__init__(reply)
        self.hold_after = hold_after
        self.delay = delay
        self.first_delay = first_delay
        self.fail_after = fail_after
        self.gate = gate
        self.started = threading.Event()
        self.finished = threading.Event()

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> Generator[int, None, None]:
        self.finished.clear()
        self.started.set()
        try:
            if self.gate is not None:
                self.gate.wait(30)
            time.sleep(self.first_delay)
            for i, token in enumerate(super().generate(prompt_ids, params, should_stop)):
                if self.fail_after is not None and i >= self.fail_after:
                    raise RuntimeError("engine exploded (secret internal detail)")
                time.sleep(self.delay)
                yield token
                if self.hold_after is not None and i + 1 >= self.hold_after:
                    _wait_until(should_stop)
        finally:
            self.finished.set()


def _wait_until(condition: Callable[[], bool], guard_s: float = HANG_GUARD_S) -> None:
    """Poll ``condition`` until it holds, or the hang guard has passed. Not ``wait_for``:
    a hold that failed must not end the generation (as an error would, which a test would
    read as stopped) but let it run on to the end, which the test then sees."""
    deadline = time.monotonic() + guard_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
