"""Pure metric functions of the evaluation (no models): groundedness, tool calls, retrieval.

Kept apart from the runner so they can be tested offline (tests/test_eval_metrics.py).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from backend.groundedness.calibration import verdict_for

GROUNDED, NOT_GROUNDED, NOT_SURE = "grounded", "notGrounded", "notSure"

# ------------------------------------------------------------------ groundedness


def balanced_accuracy(labels: Sequence[str], predictions: Sequence[str]) -> float:
    """Mean of the recall on ``grounded`` and on ``notGrounded`` cases.

    Any other prediction (``notSure``) counts as wrong. A class absent from ``labels`` is left
    out of the mean; with neither present the result is NaN.
    """
    if len(labels) != len(predictions):
        raise ValueError("labels and predictions differ in length")
    recalls = []
    for wanted in (GROUNDED, NOT_GROUNDED):
        picked = [p for label, p in zip(labels, predictions, strict=True) if label == wanted]
        if picked:
            recalls.append(sum(p == wanted for p in picked) / len(picked))
    return sum(recalls) / len(recalls) if recalls else math.nan


def rate(predictions: Sequence[str], value: str) -> float:
    """Share of ``predictions`` equal to ``value`` (NaN for none)."""
    return sum(p == value for p in predictions) / len(predictions) if predictions else math.nan


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


#: The verdict the service gives a support score under these thresholds: the service's own
#: rule, so that calibration and reports cannot drift from it.
threshold_verdict = verdict_for


# ------------------------------------------------------------------ tool calls


def normalise_text(value: str) -> str:
    """Case-folded, NFKC-normalised, whitespace collapsed, outer punctuation stripped."""
    text = unicodedata.normalize("NFKC", value).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return text.strip(" .,!?;:'\"「」『』“”‘’。、")


def value_matches(expected: Any, actual: Any, schema: Mapping[str, Any] | None = None) -> bool:
    """Whether one argument value meets its expectation.

    ``expected`` is a plain value, ``{"any_of": [...]}`` (any alternative matches) or
    ``{"contains_all": [...]}`` (a string holding every fragment, normalised). Numbers compare
    by value (``250 == 250.0``, never ``"250"``), enum members and booleans exactly, other
    strings after ``normalise_text``.
    """
    schema = schema or {}
    if isinstance(expected, Mapping):
        if "any_of" in expected:
            return any(value_matches(option, actual, schema) for option in expected["any_of"])
        if "contains_all" in expected:
            if not isinstance(actual, str):
                return False
            text = normalise_text(actual)
            return all(normalise_text(part) in text for part in expected["contains_all"])
        raise ValueError(f"unknown expectation rule: {sorted(expected)}")
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, (int, float)):
        return isinstance(actual, (int, float)) and math.isclose(expected, actual, rel_tol=1e-9)
    if isinstance(expected, str):
        if not isinstance(actual, str):
            return False
        if "enum" in schema:
            return actual == expected
        return normalise_text(actual) == normalise_text(expected)
    return expected == actual


def arguments_match(
    expected: Mapping[str, Any], actual: Mapping[str, Any], parameters: Mapping[str, Any]
) -> bool:
    """Every expected argument is present and matches; other arguments are not judged here
    (the schema check judges them)."""
    properties = parameters.get("properties", {})
    return all(
        name in actual and value_matches(rule, actual[name], properties.get(name))
        for name, rule in expected.items()
    )


@dataclass(frozen=True)
class ToolOutcome:
    """How one tool-call case went.

    ``parsed``: the model's output was read as tool calls with JSON object arguments (or as
    plain text, when it called nothing). ``schema_valid``: every call's arguments validate
    against its tool's JSON Schema (vacuously true without calls).
    """

    expected_call: bool
    called: bool
    parsed: bool
    schema_valid: bool
    right_function: bool
    right_arguments: bool


def judge_tool_case(
    expected: Mapping[str, Any] | None,
    calls: Sequence[tuple[str, str]],
    tools: Mapping[str, Mapping[str, Any]],
) -> ToolOutcome:
    """Score one case from the model's calls, each ``(function name, arguments JSON text)``.

    The first call is the one judged for function and arguments. A case expecting no call is
    right (function and arguments) when no call was made.
    """
    parsed, valid, first_arguments = True, True, None
    for index, (name, arguments_text) in enumerate(calls):
        try:
            arguments = json.loads(arguments_text)
        except (TypeError, json.JSONDecodeError):
            parsed = valid = False
            continue
        if not isinstance(arguments, dict) or name not in tools:
            parsed = valid = False
            continue
        if index == 0:
            first_arguments = arguments
        try:
            jsonschema.validate(arguments, tools[name].get("parameters", {}))
        except jsonschema.ValidationError:
            valid = False
    if expected is None:
        return ToolOutcome(False, bool(calls), parsed, valid, not calls, not calls)
    right_function = bool(calls) and calls[0][0] == expected["name"]
    right_arguments = (
        right_function
        and first_arguments is not None
        and arguments_match(
            expected["arguments"], first_arguments, tools[expected["name"]]["parameters"]
        )
    )
    return ToolOutcome(True, bool(calls), parsed, valid, right_function, right_arguments)


def summarise_tool_outcomes(outcomes: Sequence[ToolOutcome]) -> dict[str, float]:
    """Parse and schema-valid rates over all cases; right function and arguments over the
    cases expecting a call; false-call rate over the cases expecting none."""
    calling = [o for o in outcomes if o.expected_call]
    plain = [o for o in outcomes if not o.expected_call]
    return {
        "cases": len(outcomes),
        "parse_rate": mean([float(o.parsed) for o in outcomes]),
        "schema_valid_rate": mean([float(o.schema_valid) for o in outcomes]),
        "right_function": mean([float(o.right_function) for o in calling]),
        "right_arguments": mean([float(o.right_arguments) for o in calling]),
        "false_call_rate": mean([float(o.called) for o in plain]),
        "missed_call_rate": mean([float(not o.called) for o in calling]),
    }


@dataclass(frozen=True)
class ParallelOutcome:
    """How one case needing several calls went.

    ``all_calls``: every expected call was made (name and arguments), in any order, each
    matched by its own call; ``right_functions``: the expected functions were called (as many
    times), whatever the arguments; ``calls``: how many calls the reply held.
    """

    all_calls: bool
    right_functions: bool
    calls: int


def judge_parallel_case(
    expected: Sequence[Mapping[str, Any]],
    calls: Sequence[tuple[str, str]],
    tools: Mapping[str, Mapping[str, Any]],
) -> ParallelOutcome:
    """Score a reply's calls, each ``(function name, arguments JSON text)``, against the
    calls a case expects (``{"name", "arguments"}`` rules as in ``arguments_match``)."""
    made = []
    for name, arguments_text in calls:
        try:
            arguments = json.loads(arguments_text)
        except (TypeError, json.JSONDecodeError):
            arguments = None
        made.append((name, arguments if isinstance(arguments, dict) else None))

    def fits(rule: Mapping[str, Any], call: tuple[str, dict | None]) -> bool:
        name, arguments = call
        return (
            name == rule["name"]
            and arguments is not None
            and arguments_match(rule["arguments"], arguments, tools[name]["parameters"])
        )

    all_calls = any(
        all(fits(rule, call) for rule, call in zip(expected, chosen, strict=True))
        for chosen in itertools.permutations(made, len(expected))
    )
    right_functions = sorted(r["name"] for r in expected) == sorted(n for n, _ in made)
    return ParallelOutcome(all_calls, right_functions, len(calls))


def summarise_parallel_outcomes(
    outcomes: Sequence[ParallelOutcome], single_call_counts: Sequence[int]
) -> dict[str, float]:
    """Rates over the cases: all expected calls made, the right functions, the mean number of
    calls; and, asked with ``parallel_tool_calls: false``, exactly one call."""
    return {
        "cases": len(outcomes),
        "all_calls": mean([float(o.all_calls) for o in outcomes]),
        "right_functions": mean([float(o.right_functions) for o in outcomes]),
        "mean_calls": mean([float(o.calls) for o in outcomes]),
        "one_call_when_not_parallel": mean([float(n == 1) for n in single_call_counts]),
    }


# ------------------------------------------------------------------ retrieval


def first_gold_rank(ranked_ids: Sequence[str], gold: Sequence[str]) -> int | None:
    """1-based rank of the first gold passage in ``ranked_ids``, None when absent."""
    wanted = set(gold)
    for rank, passage_id in enumerate(ranked_ids, start=1):
        if passage_id in wanted:
            return rank
    return None


def recall_at_1(ranks: Sequence[int | None]) -> float:
    return mean([float(rank == 1) for rank in ranks])


def mean_reciprocal_rank(ranks: Sequence[int | None]) -> float:
    return mean([1.0 / rank if rank else 0.0 for rank in ranks])
