"""CombiningRunner: requests that wait for a busy model are run together, each gets its own answer."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from backend.embeddings.combining import CombiningRunner
from tests.waiting import HANG_GUARD_S


class RecordingModel:
    """Doubles each item; the first batch blocks until released, so others queue behind it."""

    def __init__(self) -> None:
        self.batches: list[list[object]] = []
        self.release_first = threading.Event()

    def run(self, items):
        self.batches.append(list(items))
        if len(self.batches) == 1:
            assert self.release_first.wait(HANG_GUARD_S)
        if any(item == "bad" for item in items):
            raise ValueError("bad item")
        return [item * 2 for item in items]


def _submit_while_busy(runner, model, first, others, sizes=None):
    """Submit ``first``, then ``others`` while the first runs; return every result or error."""
    sizes = sizes or [1] * len(others)
    with ThreadPoolExecutor(len(others) + 1) as pool:
        first_future = pool.submit(runner.submit, first)
        while not model.batches:
            time.sleep(0.001)
        futures = [
            pool.submit(runner.submit, item, size) for item, size in zip(others, sizes, strict=True)
        ]
        while len(runner._pending) < len(others):  # all queued behind the running batch
            time.sleep(0.001)
        model.release_first.set()
        outcomes = []
        for future in [first_future, *futures]:
            try:
                outcomes.append(future.result(5))
            except ValueError as error:
                outcomes.append(error)
        return outcomes


def test_a_lone_request_runs_at_once():
    model = RecordingModel()
    model.release_first.set()
    runner = CombiningRunner(model.run, max_batch_size=8)
    assert runner.submit(21) == 42
    assert model.batches == [[21]]


def test_requests_waiting_behind_a_busy_model_run_as_one_batch_each_with_its_own_result():
    model = RecordingModel()
    runner = CombiningRunner(model.run, max_batch_size=100)
    outcomes = _submit_while_busy(runner, model, 0, [1, 2, 3, 4, 5])
    assert outcomes == [0, 2, 4, 6, 8, 10]
    assert model.batches[0] == [0]
    assert sorted(model.batches[1]) == [1, 2, 3, 4, 5]
    assert len(model.batches) == 2


def test_a_combined_batch_respects_the_size_cap_in_arrival_order():
    model = RecordingModel()
    runner = CombiningRunner(model.run, max_batch_size=5)
    outcomes = _submit_while_busy(runner, model, 0, [1, 2, 3], sizes=[3, 3, 2])
    assert outcomes == [0, 2, 4, 6]
    combined = model.batches[1:]
    assert all(len(batch) <= 2 for batch in combined)
    assert sorted(item for batch in combined for item in batch) == [1, 2, 3]


def test_a_failing_request_fails_alone_not_the_ones_it_was_batched_with():
    model = RecordingModel()
    runner = CombiningRunner(model.run, max_batch_size=100)
    outcomes = _submit_while_busy(runner, model, 0, [1, "bad", 3])
    assert outcomes[0] == 0 and outcomes[1] == 2 and outcomes[3] == 6
    assert isinstance(outcomes[2], ValueError)
    with pytest.raises(ValueError, match="bad item"):
        runner.submit("bad")
    assert runner.submit(7) == 14  # the runner is still usable
