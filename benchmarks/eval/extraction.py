"""Structured extraction: texts read into JSON under a ``response_format``, judged field by field.

Each case of ``extraction.jsonl`` (the development set) and ``extraction_heldout.jsonl`` holds a
short text, a JSON Schema and the expected answer. Three modes ask for it:

* ``schema``: ``response_format`` ``json_schema``, greedy: validity and the accuracy figure.
* ``sampled``: the same at the spec's default temperature (the field left out): validity must
  hold whatever is sampled.
* ``json_object``: ``{"type": "json_object"}`` with the schema written in the user message:
  every answer must parse as an object; validity and accuracy are reported for comparison.

The matching rules (decided before any run, tested offline in tests/eval/test_eval_metrics.py):

* Every leaf of the expected answer is one field. A key the answer lacks makes every leaf
  under it wrong; an expected ``null`` is right when the key is absent or null.
* Integers and booleans compare exactly (``True`` is not ``1``), other numbers within a
  relative tolerance of ``NUMBER_TOLERANCE``; enum members exactly; other strings after
  ``metrics.normalise_text`` (NFKC, case and whitespace folded, outer punctuation dropped).
  ``{"any_of": [...]}`` accepts any alternative, ``{"contains_all": [...]}`` a string holding
  every fragment (for names the text words loosely: "Millbrook Park bandstand").
* A list of scalars is one field, right when it is the expected multiset: same length, every
  expected element matched by a distinct answer element.
* A list of objects is compared item by item in order (the order of the text), plus one
  field for its length.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import jsonschema

from backend.protocol.catalogue import DEFAULT_CHAT_MODEL
from benchmarks.eval import metrics

MODES = ("schema", "sampled", "json_object")
NUMBER_TOLERANCE = 1e-3
#: Generous: the longest expected answer is about 250 tokens; an answer cut here is invalid.
MAX_TOKENS = 700
INSTRUCTION = (
    "Extract the information in the text below as JSON. Copy names and other text as they are "
    "written in the text; write dates as YYYY-MM-DD and times as 24-hour HH:MM."
)


# ------------------------------------------------------------------ matching


def _is_rule(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) <= {"any_of", "contains_all"} and bool(value)


def leaf_matches(expected: Any, actual: Any, schema: Mapping[str, Any] | None = None) -> bool:
    """Whether one scalar value (or a rule) meets its expectation (module docstring rules)."""
    schema = schema or {}
    if isinstance(expected, Mapping) and "any_of" in expected:
        return any(leaf_matches(option, actual, schema) for option in expected["any_of"])
    if expected is None:
        return actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, (int, float)):
        if not isinstance(actual, (int, float)):
            return False
        if schema.get("type") == "integer":
            return actual == expected
        return math.isclose(expected, actual, rel_tol=NUMBER_TOLERANCE, abs_tol=1e-9)
    if isinstance(expected, list):
        return isinstance(actual, list) and multiset_matches(expected, actual, schema)
    return metrics.value_matches(expected, actual, schema)


def multiset_matches(expected: Sequence[Any], actual: Sequence[Any], schema: Mapping) -> bool:
    """Same length, and every expected element matched by a distinct answer element."""
    if len(expected) != len(actual):
        return False
    items = schema.get("items", {})
    unused = list(actual)
    for wanted in expected:
        match = next((i for i, a in enumerate(unused) if leaf_matches(wanted, a, items)), None)
        if match is None:
            return False
        unused.pop(match)
    return True


def _is_object_list(value: Any) -> bool:
    return isinstance(value, list) and any(
        isinstance(v, Mapping) and not _is_rule(v) for v in value
    )


def count_fields(expected: Any) -> int:
    """How many fields an expected value holds (module docstring rules)."""
    if isinstance(expected, Mapping) and not _is_rule(expected):
        return sum(count_fields(v) for v in expected.values())
    if _is_object_list(expected):
        return 1 + sum(count_fields(v) for v in expected)
    return 1


def right_fields(expected: Any, actual: Any, schema: Mapping[str, Any] | None = None) -> int:
    """How many of ``expected``'s fields ``actual`` gets right (module docstring rules)."""
    schema = schema or {}
    if isinstance(expected, Mapping) and not _is_rule(expected):
        properties = schema.get("properties", {})
        present = actual if isinstance(actual, Mapping) else {}
        return sum(
            right_fields(value, present[key], properties.get(key))
            if key in present
            else int(value is None)
            for key, value in expected.items()
        )
    if _is_object_list(expected):
        if not isinstance(actual, list):
            return 0
        items = schema.get("items", {})
        return int(len(actual) == len(expected)) + sum(
            right_fields(e, a, items) for e, a in zip(expected, actual, strict=False)
        )
    return int(leaf_matches(expected, actual, schema))


# ------------------------------------------------------------------ one case


@dataclass(frozen=True)
class ExtractionOutcome:
    """How one answer went: ``parsed`` (one JSON object), ``valid`` (against the case's
    schema), fields right of the expected ones, and why generation stopped."""

    parsed: bool
    valid: bool
    fields: int
    right: int
    finish_reason: str


def judge_answer(
    content: str | None, case: Mapping[str, Any], finish_reason: str
) -> ExtractionOutcome:
    fields = count_fields(case["expected"])
    try:
        answer = json.loads(content or "")
    except json.JSONDecodeError:
        return ExtractionOutcome(False, False, fields, 0, finish_reason)
    if not isinstance(answer, dict):
        return ExtractionOutcome(False, False, fields, 0, finish_reason)
    valid = jsonschema.Draft202012Validator(case["schema"]).is_valid(answer)
    right = right_fields(case["expected"], answer, case["schema"])
    return ExtractionOutcome(True, valid, fields, right, finish_reason)


def extraction_request(case: Mapping[str, Any], mode: str) -> dict[str, Any]:
    """The chat request of one case in one mode (``MODES``)."""
    if mode not in MODES:
        raise ValueError(f"unknown extraction mode {mode!r}; use one of: {', '.join(MODES)}")
    content = f"{INSTRUCTION}\n\nText:\n{case['text']}"
    request: dict[str, Any] = {"model": DEFAULT_CHAT_MODEL, "max_tokens": MAX_TOKENS}
    if mode == "json_object":
        schema = json.dumps(case["schema"], ensure_ascii=False)
        content += f"\n\nThe JSON object must be valid against this JSON Schema:\n{schema}"
        request["response_format"] = {"type": "json_object"}
    else:
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": case["schema_name"], "schema": case["schema"], "strict": True},
        }
    if mode != "sampled":  # sampled: the spec's default temperature
        request["temperature"] = 0
    request["messages"] = [{"role": "user", "content": content}]
    return request


# ------------------------------------------------------------------ a set


def evaluate_extraction(
    backend: Any,
    cases: Sequence[Mapping[str, Any]],
    modes: Sequence[str] = MODES,
    workers: int = 1,
    on_row: Callable[[str, dict[str, Any]], None] = lambda mode, row: None,
) -> dict[str, Any]:
    """Every case in every mode, through ``backend.chat``; a summary per mode and every row.

    ``workers`` > 1 sends that many requests at once (the llama.cpp engine decodes them in one
    batch: faster on a CPU, and greedy answers can differ slightly from one-at-a-time ones,
    README "Models and configuration"). ``on_row`` sees each row as it is judged.
    """

    def one(case: Mapping[str, Any], mode: str) -> dict[str, Any]:
        started = time.perf_counter()
        reply = backend.chat(extraction_request(case, mode))
        choice = reply.choices[0]
        outcome = judge_answer(choice.message.content, case, choice.finish_reason)
        row = {
            "id": case["id"],
            "language": case["language"],
            "content": choice.message.content,
            "completion_tokens": reply.usage.completion_tokens,
            "seconds": time.perf_counter() - started,
            **asdict(outcome),
        }
        on_row(mode, row)
        return row

    results: dict[str, Any] = {}
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for mode in modes:
            rows = list(pool.map(one, cases, [mode] * len(cases)))
            results[mode] = {"summary": summarise_extraction(rows), "cases": rows}
    return results


def summarise_extraction(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Parse and validity rates, and field accuracy (right fields / expected fields, over all
    cases, unparsed answers counting zero) overall and per language."""

    def accuracy(selected: Sequence[Mapping[str, Any]]) -> float:
        fields = sum(r["fields"] for r in selected)
        return sum(r["right"] for r in selected) / fields if fields else math.nan

    return {
        "cases": len(rows),
        "parse_rate": metrics.mean([float(r["parsed"]) for r in rows]),
        "schema_valid_rate": metrics.mean([float(r["valid"]) for r in rows]),
        "field_accuracy": accuracy(rows),
        "field_accuracy_by_language": {
            lang: accuracy([r for r in rows if r["language"] == lang])
            for lang in sorted({r["language"] for r in rows})
        },
        "cut_at_max_tokens": sum(r["finish_reason"] == "length" for r in rows),
        "seconds_per_case": metrics.mean([r["seconds"] for r in rows]),
    }
