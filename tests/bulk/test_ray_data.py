"""Ray Data front-end on a real local Ray (2 CPUs, one actor per pool): rows embedded and
checked by actors equal the in-process results, other columns and row identity are kept,
requests stay within the API's limits, and a bad row fails alone with its message in
``error``. The offline tests send to a loopback server over the offline doubles; the model
tests run the small profile in the actors."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from backend.bulk import BulkRunner  # noqa: E402
from backend.bulk.ray_data import (  # noqa: E402
    ActorPool,
    check_groundedness_dataset,
    embed_dataset,
)
from backend.bulk.ray_report import COLUMN_TYPES, groundedness_report_dataset  # noqa: E402
from backend.groundedness.report_summary import ROW_COLUMNS  # noqa: E402
from backend.protocol.limits import MAX_EMBEDDING_INPUTS  # noqa: E402
from backend.testing import EchoChatEngine, RecordingBackend, offline_backend  # noqa: E402
from backend.testing.servers import RunningServer, running_server  # noqa: E402
from benchmarks.texts import mixed_texts  # noqa: E402

EVAL_PAIRS = Path(__file__).resolve().parents[2] / "benchmarks" / "eval" / "groundedness.jsonl"
TOO_LONG = "word " * 5000  # 5000 tokens and more: over the 4000 a string may have
ONE_ACTOR = {"pool": ActorPool(concurrency=1)}  # one pool start per test: the slow part on 2 cores


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """One local Ray for the module, started with no CORE_* settings in its environment
    (the actors get theirs as arguments), shut down at the end with no process left."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("CORE_")]:
            patch.delenv(name)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    started = [p for p in psutil.Process().children(recursive=True) if _is_ray(p)]
    ray.shutdown()
    _, alive = psutil.wait_procs(started, timeout=60)
    for leftover in alive:
        leftover.kill()
    assert not alive, f"Ray processes outlived ray.shutdown(): {[p.pid for p in alive]}"


def _is_ray(process: psutil.Process) -> bool:
    try:
        return "ray" in " ".join(process.cmdline())
    except psutil.Error:  # already gone
        return False


def _rows_by_id(dataset) -> dict[int, dict]:
    return {row["id"]: row for row in dataset.take_all()}


# ---------------------------------------------------------------- offline, over a server


@pytest.fixture(scope="module")
def offline_server() -> Iterator[tuple[RunningServer, RecordingBackend]]:
    """A loopback server over the offline doubles, recording the requests it gets."""
    service = RecordingBackend(offline_backend())
    with running_server(service) as running:
        yield running, service


def _server_options(running: RunningServer) -> dict:
    return {"base_url": running.url, "api_key": running.api_key}


def test_rows_embedded_over_a_server_fail_alone_and_requests_keep_the_limits(offline_server):
    running, recorded = offline_server
    recorded.requests.clear()
    bad = {3: "", 120: None, 230: "x" * 5000}
    rows = [
        {"id": i, "text": bad.get(i, f"text number {i}"), "topic": f"t{i % 3}"} for i in range(250)
    ]
    out = _rows_by_id(
        embed_dataset(ray.data.from_items(rows), **_server_options(running), **ONE_ACTOR)
    )

    assert sorted(out) == list(range(250))
    assert all(out[i]["topic"] == f"t{i % 3}" for i in out)  # other columns kept
    assert out[3]["error"] == "column 'text' must hold a non-empty string, not ''"
    assert out[120]["error"] == "column 'text' must hold a non-empty string, not None"
    assert "at most 4000 tokens are allowed per string" in out[230]["error"]
    good = [i for i in range(250) if i not in bad]
    expected = BulkRunner(offline_backend(), progress=False).embed([out[i]["text"] for i in good])
    for i, vector in zip(good, expected, strict=True):
        assert out[i]["error"] is None
        np.testing.assert_allclose(out[i]["embedding"], vector, rtol=1e-6)
    assert all(out[i]["embedding"] is None for i in bad)

    sent = [request["input"] for request in recorded.requests if "input" in request]
    assert max(map(len, sent)) <= MAX_EMBEDDING_INPUTS
    assert not any(text in ("", None) for request in sent for text in request)
    # The request holding the long text was refused and split: that text was then sent alone.
    assert [bad[230]] in sent


def test_groundedness_over_a_server_has_no_support_and_bad_rows_fail_alone(offline_server):
    running, _ = offline_server
    # Contexts here are lists of texts (retrieved documents); an Arrow column holds one type.
    rows = [
        {"id": 0, "context": ["The sky is blue."], "response": "The sky is blue."},
        {"id": 1, "context": None, "response": "The sky is blue."},
        {"id": 2, "context": ["The sky is blue.", "Grass is green."], "response": "Grass is red."},
        {"id": 3, "context": ["The sky is blue."], "response": ""},
        {"id": 4, "context": [], "response": "The sky is blue."},
    ]
    out = _rows_by_id(
        check_groundedness_dataset(
            ray.data.from_items(rows),
            # ray_remote_args reach map_batches beside the pool's own options
            pool=ActorPool(concurrency=1, ray_remote_args={"memory": 200 * 2**20}),
            **_server_options(running),
        )
    )
    local = offline_backend()
    for i in (0, 2):
        expected = local.check_groundedness(rows[i]["context"], rows[i]["response"])
        assert (out[i]["verdict"], out[i]["support"], out[i]["error"]) == (
            expected.verdict,
            None,  # a server answers with the verdict alone
            None,
        )
    assert out[1]["error"] == "column 'context' must hold a non-empty string, not None"
    assert out[3]["error"] == "column 'response' must hold a non-empty string, not ''"
    assert out[4]["error"] == "column 'context' must hold texts, not []"
    assert all(out[i]["verdict"] is None and out[i]["support"] is None for i in (1, 3, 4))


def test_reports_over_a_server_give_one_row_per_claim_and_bad_rows_stay_one_row():
    # The echo judge finds a claim supported exactly when its document holds it verbatim.
    rows = [
        {
            "id": 0,
            "context": "The sky is blue. Grass is green.",
            "response": "The sky is blue. Grass is red.",
        },
        {"id": 1, "context": "Water is wet.", "response": ""},
        {"id": 2, "context": "Water is wet.", "response": "Water is wet."},
    ]
    with running_server(offline_backend(EchoChatEngine())) as running:
        out = groundedness_report_dataset(
            ray.data.from_items(rows), **_server_options(running), **ONE_ACTOR
        ).take_all()
    out.sort(key=lambda row: (row["id"], row["claim"] or 0))
    assert tuple(COLUMN_TYPES) == ROW_COLUMNS
    assert list(out[0]) == ["id", "context", "response", *ROW_COLUMNS, "error"]
    assert [[r["id"], r["claim_text"], r["verdict"], r["check_verdict"]] for r in out] == [
        [0, "The sky is blue.", "grounded", "notGrounded"],
        [0, "Grass is red.", "notGrounded", "notGrounded"],
        [1, None, None, None],
        [2, "Water is wet.", "grounded", "grounded"],
    ]
    assert [r["error"] for r in out] == [
        None,
        None,
        "column 'response' must hold a non-empty string, not ''",
        None,
    ]
    assert out[0]["corrected_response"] == "The sky is blue."
    for row in (out[0], out[1], out[3]):
        assert row["response"][row["start"] : row["end"]] == row["claim_text"]
        evidence = row["context"][row["evidence_start"] : row["evidence_end"]]
        assert evidence == row["evidence_text"]
        assert 0 <= row["support"] <= 1  # a server's report has the supports too


def test_an_unknown_kind_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="document"):
        embed_dataset(ray.data.from_items([{"text": "a"}]), kind="document")


def test_a_missing_ray_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "ray.data", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "backend.bulk.ray_data")
    with pytest.raises(ImportError, match=r"pip install 'core-textmodels\[ray\]'"):
        importlib.import_module("backend.bulk.ray_data")


# ---------------------------------------------------------------- the small models in actors


@pytest.mark.model
def test_embeddings_equal_the_in_process_vectors_row_by_row(small_backend):
    texts = mixed_texts(200, 3, 40, seed=7)
    rows = [{"id": i, "text": text, "length": len(text)} for i, text in enumerate(texts)]
    rows += [{"id": 200, "text": None, "length": 0}, {"id": 201, "text": "", "length": 0}]
    dataset = embed_dataset(ray.data.from_items(rows), profile="small", **ONE_ACTOR)
    out = _rows_by_id(dataset)

    expected = BulkRunner(small_backend, progress=False).embed(texts)
    for i, text in enumerate(texts):
        row = out[i]
        assert (row["text"], row["length"], row["error"]) == (text, len(text), None)
        assert float(np.dot(row["embedding"], expected[i])) >= 0.9999, i
    assert out[200]["error"].endswith("not None") and out[201]["error"].endswith("not ''")
    assert out[200]["embedding"] is None and out[201]["embedding"] is None


def _shortest_eval_pairs(count: int) -> list[dict]:
    pairs = [json.loads(line) for line in EVAL_PAIRS.read_text(encoding="utf-8").splitlines()]
    pairs.sort(key=lambda pair: (len(pair["context"]) + len(pair["response"]), pair["id"]))
    return [
        {"id": pair["id"], "context": pair["context"], "response": pair["response"]}
        for pair in pairs[:count]
    ]


@pytest.mark.model
def test_groundedness_verdicts_equal_the_in_process_verdicts(small_backend):
    pairs = _shortest_eval_pairs(8)
    rows = [*pairs, {"id": "empty", "context": "Some context.", "response": ""}]
    dataset = check_groundedness_dataset(ray.data.from_items(rows), profile="small", **ONE_ACTOR)
    out = _rows_by_id(dataset)

    verdicts = set()
    for pair in pairs:
        expected = small_backend.check_groundedness(pair["context"], pair["response"])
        row = out[pair["id"]]
        assert (row["verdict"], row["error"]) == (expected.verdict, None), pair["id"]
        assert 0.0 <= row["support"] <= 1.0
        verdicts.add(expected.verdict)
    assert {"grounded", "notGrounded"} <= verdicts  # both kinds of pair were checked
    assert out["empty"]["error"] == "column 'response' must hold a non-empty string, not ''"
    assert out["empty"]["verdict"] is None and out["empty"]["support"] is None


@pytest.mark.model
def test_reports_in_actors_equal_the_in_process_reports(small_backend):
    pairs = _shortest_eval_pairs(4)
    out = groundedness_report_dataset(
        ray.data.from_items(pairs), profile="small", **ONE_ACTOR
    ).take_all()
    for pair in pairs:
        expected = small_backend.check_groundedness_report(pair["context"], pair["response"])
        rows = sorted((r for r in out if r["id"] == pair["id"]), key=lambda r: r["claim"])
        assert [(r["claim_text"], r["verdict"]) for r in rows] == [
            (claim.text, claim.verdict) for claim in expected.claims
        ], pair["id"]
        assert {r["check_verdict"] for r in rows} == {expected.verdict}
        assert all(r["error"] is None for r in rows)
