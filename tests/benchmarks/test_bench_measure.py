"""The benchmarks' shared arithmetic, offline (no models, no timing)."""

import pytest

from benchmarks.measure import rotated
from benchmarks.transformers_batching import aggregate_rate, stream_counts


def test_rotated_runs_each_side_once_per_repetition_in_a_rotating_order():
    calls = []
    readings = {"a": iter([5.0, 1.0, 3.0]), "b": iter([2.0, 2.0, 9.0]), "c": iter([7, 8, 6])}

    def side(name):
        def measure():
            calls.append(name)
            return next(readings[name])

        return measure

    medians = rotated({name: side(name) for name in "abc"}, repeats=3)

    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert medians == {"a": 3.0, "b": 2.0, "c": 7}


def test_aggregate_rate_is_every_streams_tokens_over_the_wall_time():
    assert aggregate_rate([64, 64, 64, 64], 64, seconds=8.0) == 32.0


def test_aggregate_rate_refuses_a_stream_that_decoded_another_count():
    # A stream that stopped early (an end token) would make the sides compute different work.
    with pytest.raises(RuntimeError, match="decoded 63 tokens instead of 64"):
        aggregate_rate([64, 63], 64, seconds=1.0)


def test_64_streams_are_measured_on_a_gpu_only():
    assert stream_counts(cuda=False) == [1, 4, 16]
    assert stream_counts(cuda=True) == [1, 4, 16, 64]
