"""Quality floors of both profiles on a fixed part of the evaluation sets (issue 9).

Each floor is what ``make eval`` measured on these same cases (benchmarks/eval/
results-<profile>.json, the rows of the subset below), less a margin of about one case; they
stop quality from slipping back. A fixed share of each set keeps the run short on CPU: every
eighth clear short groundedness pair (15: both labels, three languages) and every eighth tool
case (6: four tools, two needing none, three languages), on each profile; all retrieval
queries once (both profiles share the embedding model).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from benchmarks.eval.extraction import evaluate_extraction
from benchmarks.eval.run_eval import (
    evaluate_groundedness,
    evaluate_retrieval,
    evaluate_tools,
    load_jsonl,
    load_tools,
)

pytestmark = pytest.mark.model

# Floors per profile, the figures measured on the subset in the comments. The judge's reader
# depends on the CPU (a bf16 copy with AMX, llama.cpp elsewhere; each with its calibrated
# thresholds), so the groundedness floors sit a case below the lower of the two readers (both
# figures replay the supports in calibration-<profile>-<reader>.json at the thresholds
# configured for that reader).
FLOORS: dict[str, dict[str, float]] = {
    "default": {
        # measured 0.857 (llama.cpp, the learned reading), 0.786 (bf16, P(yes))
        "groundedness_balanced_accuracy": 0.72,
        "groundedness_not_sure_clear_ceiling": 0.14,  # measured 0.0 with either (no band)
        "tool_parse": 1.0,  # measured 1.0: calls are decoded under the schema
        "tool_schema_valid": 1.0,  # measured 1.0
        "tool_right_function": 0.75,  # measured 1.0 (4 calls); one miss allowed
        "tool_right_arguments": 0.75,  # measured 1.0
        "tool_false_call_ceiling": 0.5,  # measured 0.0; one of the two no-tool cases allowed
    },
    "small": {
        "groundedness_balanced_accuracy": 0.6,  # measured 0.723 (llama.cpp), 0.652 (bf16)
        "groundedness_not_sure_clear_ceiling": 0.14,  # measured 0.0 (llama.cpp), 0.067 (bf16)
        "tool_parse": 0.83,  # measured 1.0; one case in 6 allowed
        "tool_schema_valid": 1.0,  # measured 1.0
        "tool_right_function": 0.5,  # measured 0.75 (3 of the 4 calls)
        "tool_right_arguments": 0.5,  # measured 0.75
        "tool_false_call_ceiling": 0.5,  # measured 0.0; one of the two no-tool cases allowed
    },
}
# Extraction on the small profile, greedy, under the json_schema format (every eighth
# development case: an invoice in English, a contact in Korean, an event in Japanese, 35
# fields): every answer valid by construction; fields measured 26 of 35 (0.743; 14/15, 6/11,
# 6/9), the floor about a case's worth below.
EXTRACTION_FIELD_FLOOR = 0.5
RETRIEVAL_RECALL_AT_1_FLOOR = 0.95  # measured 0.984 (61 of 62)
RETRIEVAL_MRR_FLOOR = 0.97  # measured 0.992


def groundedness_subset() -> list[dict[str, Any]]:
    cases = load_jsonl("groundedness.jsonl")
    return [c for c in cases if c["clear"] and not c["long_context"]][::8]


def tool_subset() -> list[dict[str, Any]]:
    return load_jsonl("tool_calls.jsonl")[::8]


@pytest.fixture(scope="module", params=sorted(FLOORS))
def profile(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def profile_backend(profile: str, small_backend):
    """The small profile's shared backend, or the default profile's, loaded for this module."""
    if profile == "small":
        yield small_backend
        return
    from backend.backends.local import InProcessBackend
    from backend.engines.weights.embedded_chat import DEFAULT, EmbeddedWeightsError, part_paths

    try:
        part_paths(DEFAULT)
    except EmbeddedWeightsError as error:
        # `make test` installs it; a run with CORE_MODEL_PROFILE=small deliberately does not.
        pytest.skip(f"the default profile's chat model is not installed: {error}")
    service = InProcessBackend(profile=profile, device=os.environ.get("CORE_TEST_DEVICE"))
    yield service
    service.close()


def test_groundedness_floor(profile: str, profile_backend) -> None:
    floors = FLOORS[profile]
    summary = evaluate_groundedness(profile_backend, groundedness_subset())["summary"]
    assert summary["balanced_accuracy"] >= floors["groundedness_balanced_accuracy"], summary
    assert summary["not_sure_rate_clear"] <= floors["groundedness_not_sure_clear_ceiling"], summary


def test_tool_call_floor(profile: str, profile_backend) -> None:
    floors = FLOORS[profile]
    summary = evaluate_tools(profile_backend, tool_subset(), load_tools())["summary"]
    assert summary["parse_rate"] >= floors["tool_parse"], summary
    assert summary["schema_valid_rate"] >= floors["tool_schema_valid"], summary
    assert summary["right_function"] >= floors["tool_right_function"], summary
    assert summary["right_arguments"] >= floors["tool_right_arguments"], summary
    assert summary["false_call_rate"] <= floors["tool_false_call_ceiling"], summary


def extraction_subset() -> list[dict[str, Any]]:
    return load_jsonl("extraction.jsonl")[::8]


def test_extraction_floor(small_backend) -> None:
    summary = evaluate_extraction(small_backend, extraction_subset(), ["schema"])["schema"]
    assert summary["summary"]["schema_valid_rate"] == 1.0, summary["cases"]
    assert summary["summary"]["field_accuracy"] >= EXTRACTION_FIELD_FLOOR, summary["cases"]


def test_retrieval_floor(small_backend) -> None:
    result = evaluate_retrieval(
        small_backend, load_jsonl("retrieval_corpus.jsonl"), load_jsonl("retrieval_queries.jsonl")
    )
    summary = result["summary"]
    assert summary["recall_at_1"] >= RETRIEVAL_RECALL_AT_1_FLOOR, summary
    assert summary["mrr"] >= RETRIEVAL_MRR_FLOOR, summary
