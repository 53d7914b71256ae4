"""The same-answer replay's own logic, offline: its probes, its comparison, its options and
its results file (``benchmarks/determinism.py``; the replay itself needs a model)."""

from __future__ import annotations

import json

import pytest

from benchmarks.determinism import compare, parse
from benchmarks.determinism_engines import Results
from benchmarks.determinism_requests import probe_requests


def test_probes_differ_from_each_other():
    requests = probe_requests(24, max_tokens=24)
    assert len({json.dumps(r["messages"]) for r in requests}) == 24
    assert {r["max_tokens"] for r in requests} == {24}


def answer(tokens: str, logprob: float):
    """An answer as ``read_probes`` reads it: its text, and each token with its logprob and
    its alternatives."""
    return tokens, [(t, logprob, [(t, logprob)]) for t in tokens]


def test_compare_counts_identical_readings_and_the_largest_differences(capsys):
    before = [answer("ab", -0.5), answer("c", -1.0), ("grounded", 0.75), ("grounded", 0.25)]
    after = [answer("ab", -0.5), answer("c", -1.25), ("grounded", 0.75), ("notGrounded", 0.5)]
    result = compare(before, after, answers=2, label="probe")
    assert result["answers_identical"] == 1
    assert result["same_text"] == 2
    assert result["checks_identical"] == 1
    assert result["largest_logprob_difference"] == pytest.approx(0.25)
    assert result["largest_support_difference"] == pytest.approx(0.25)
    assert "1/2 answers" in capsys.readouterr().out


def test_tiny_means_random_weights_on_transformers_and_few_requests():
    args = parse(["--tiny", "--settings", "default", "deterministic"])
    assert (args.engine, args.dummy, args.profile) == ("transformers", True, "default")
    assert args.requests < 50 and args.settings == ["default", "deterministic"]
    assert parse(["--deterministic"]).settings == ["deterministic"]
    with pytest.raises(SystemExit):
        parse(["--dummy", "--engine", "llama.cpp"])


def test_results_are_written_after_each_part(tmp_path):
    path = tmp_path / "out" / "determinism.json"
    results = Results(path, {"engine": "transformers"})
    results.record("default", "seeded_alone", 20)
    assert json.loads(path.read_text())["settings"]["default"]["seeded_alone"] == 20
    table = results.table([("seeded", lambda f: str(f["seeded_alone"])), ("x", lambda f: f["x"])])
    assert table.splitlines()[1].split() == ["seeded", "20"]
    assert table.splitlines()[2].split() == ["x", "-"]
