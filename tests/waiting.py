"""Waiting for a state, as tests must (never for a duration): one helper for the suite."""

from __future__ import annotations

import time
from collections.abc import Callable

#: How long a wait may last before the test fails: a guard against a hang on a loaded
#: machine, never a speed bound.
HANG_GUARD_S = 60.0


def wait_for(
    condition: Callable[[], bool], what: str = "the state waited for", limit: float = HANG_GUARD_S
) -> None:
    """Return once ``condition()`` holds; fail if it never does within ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.005)
