"""Same request, same answer: greedy answers (tokens and log-probabilities) and groundedness
checks (verdict and support) read bit for bit the same before and after a mixed workload on
the session's shared backend, whatever the suite ran on it before (a shorter version of
``benchmarks/determinism.py``, whose figures are in benchmarks/README.md)."""

from __future__ import annotations

import pytest

from benchmarks.determinism import probe_checks, probe_requests, read_probes, replay, workload

pytestmark = pytest.mark.model


def test_probes_read_the_same_after_a_mixed_workload(small_backend):
    requests, checks = probe_requests()[:4], probe_checks()[:2]
    before = read_probes(small_backend, requests, checks)
    # Eight clients: cancelled streams, tool calls, JSON mode, sampled answers, a check on a
    # long context and a long prompt, decoded together.
    items = workload(40, seed=5)
    kinds = {kind for kind, _ in items}
    one_of_each = [next(item for item in items if item[0] == kind) for kind in sorted(kinds)]
    replay(small_backend, one_of_each + [i for i in items if i[0] == "cancel"][1:3], threads=8)
    after = read_probes(small_backend, requests, checks)
    assert after == before
