"""The extraction evaluation's matching rules and its two sets, offline (no models)."""

import json
from collections import Counter
from typing import Any

import jsonschema
import pytest

from backend.chat.response_format import format_constraint
from backend.protocol.schemas import ResponseFormat
from benchmarks.eval.extraction import (
    MODES,
    count_fields,
    extraction_request,
    judge_answer,
    leaf_matches,
    right_fields,
    summarise_extraction,
)
from benchmarks.eval.run_eval import EXTRACTION_SETS, load_jsonl

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "height_m": {"type": "number"},
        "member": {"type": "boolean"},
        "tier": {"type": "string", "enum": ["basic", "Gold"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "orders": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"item": {"type": "string"}, "qty": {"type": "integer"}},
            },
        },
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
        },
    },
}
EXPECTED = {
    "name": "Ｊｏｓé  Silva",
    "age": 41,
    "height_m": 1.82,
    "member": True,
    "tier": "Gold",
    "tags": ["a", "b", "b"],
    "orders": [{"item": {"contains_all": ["coffee"]}, "qty": 2}, {"item": "tea", "qty": 1}],
    "address": {"city": {"any_of": ["Lisbon", "Lisboa"]}, "zip": None},
}
RIGHT = {
    "name": "josé silva.",
    "age": 41,
    "height_m": 1.8205,
    "member": True,
    "tier": "Gold",
    "tags": ["b", "a", "b"],
    "orders": [{"item": "Coffee beans", "qty": 2}, {"item": "Tea", "qty": 1}],
    "address": {"city": "Lisboa"},
}


def test_field_count_leaves_plus_a_length_per_list_of_objects():
    # 6 scalars or scalar lists, 1 length + 2 x 2 order leaves, 2 address leaves
    assert count_fields(EXPECTED) == 6 + 5 + 2


def test_a_fully_right_answer_gets_every_field():
    assert right_fields(EXPECTED, RIGHT, SCHEMA) == count_fields(EXPECTED)


@pytest.mark.parametrize(
    ("change", "lost"),
    [
        ({"age": 41.01}, 1),  # integers compare exactly
        ({"age": 42}, 1),
        ({"height_m": 1.9}, 1),  # beyond the relative tolerance
        ({"member": 1}, 1),  # booleans are not numbers
        ({"tier": "gold"}, 1),  # enum members exactly
        ({"tags": ["a", "b"]}, 1),  # multisets: the count matters
        ({"tags": ["a", "b", "c"]}, 1),
        ({"orders": [{"item": "coffee", "qty": 2}]}, 3),  # length, and the tea item's 2
        ({"orders": [{"item": "tea", "qty": 1}, {"item": "coffee", "qty": 2}]}, 4),  # order
        ({"address": {"city": "Porto", "zip": None}}, 1),
        ({"address": {"city": "Lisbon", "zip": "1000"}}, 1),  # expected null: absent or null
        ({"name": None}, 1),
    ],
)
def test_each_rule_costs_the_fields_it_should(change: dict[str, Any], lost: int):
    answer = {**RIGHT, **change}
    assert right_fields(EXPECTED, answer, SCHEMA) == count_fields(EXPECTED) - lost


def test_a_missing_key_loses_every_field_under_it():
    answer = {k: v for k, v in RIGHT.items() if k != "orders"}
    assert right_fields(EXPECTED, answer, SCHEMA) == count_fields(EXPECTED) - 5


def test_numbers_match_within_the_tolerance_and_not_as_strings():
    number = {"type": "number"}
    assert leaf_matches(375.84, 375.84, number) and leaf_matches(15, 15.0, number)
    assert leaf_matches(21.0975, 21.1, number) and not leaf_matches(21.0975, 21, number)
    assert not leaf_matches(15, "15", number)


def test_judging_an_answer():
    case = {"expected": {"n": 1}, "schema": {"type": "object", "required": ["n"]}}
    assert judge_answer('{"n": 1}', case, "stop").right == 1
    broken = judge_answer('{"n": 1', case, "length")
    assert not broken.parsed and not broken.valid and broken.right == 0
    invalid = judge_answer('{"m": 1}', case, "stop")
    assert invalid.parsed and not invalid.valid and invalid.right == 0
    assert not judge_answer("[1]", case, "stop").parsed


def test_summary_counts_fields_over_all_cases_and_per_language():
    rows = [
        {"language": "en", "parsed": True, "valid": True, "fields": 10, "right": 9,
         "finish_reason": "stop", "seconds": 1.0},
        {"language": "ko", "parsed": False, "valid": False, "fields": 5, "right": 0,
         "finish_reason": "length", "seconds": 3.0},
    ]  # fmt: skip
    summary = summarise_extraction(rows)
    assert summary["field_accuracy"] == pytest.approx(9 / 15)
    assert summary["field_accuracy_by_language"] == {"en": 0.9, "ko": 0.0}
    assert summary["parse_rate"] == 0.5 and summary["cut_at_max_tokens"] == 1


def test_requests_per_mode():
    case = {"text": "T", "schema": {"type": "object"}, "schema_name": "s"}
    greedy, sampled, json_mode = (extraction_request(case, mode) for mode in MODES)
    assert greedy["temperature"] == 0 and "temperature" not in sampled
    assert greedy["response_format"]["type"] == "json_schema"
    assert json_mode["response_format"] == {"type": "json_object"}
    assert '{"type": "object"}' in json_mode["messages"][0]["content"]


# ------------------------------------------------------------------ the sets


def _concrete(value: Any) -> Any:
    """An answer that meets the expectation: the first alternative, the fragments joined."""
    if isinstance(value, dict):
        if "any_of" in value:
            return _concrete(value["any_of"][0])
        if "contains_all" in value:
            return " ".join(value["contains_all"])
        return {k: _concrete(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    return value


def _all_cases() -> list[dict[str, Any]]:
    return [case for name in EXTRACTION_SETS.values() for case in load_jsonl(name)]


def test_sets_size_languages_and_unique_ids():
    development, heldout = (load_jsonl(name) for name in EXTRACTION_SETS.values())
    assert len(development) >= 20 and len(heldout) >= 10
    for cases in (development, heldout):
        languages = Counter(c["language"] for c in cases)
        assert set(languages) == {"en", "ko", "ja"}
        assert min(languages.values()) >= len(cases) // 3
    ids = [c["id"] for c in _all_cases()]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("case", _all_cases(), ids=lambda c: c["id"])
def test_every_schema_compiles_and_its_expected_answer_validates_and_scores_full(case):
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": case["schema"]},
    }
    assert format_constraint(ResponseFormat.model_validate(response_format)) is not None
    answer = _concrete(case["expected"])
    jsonschema.Draft202012Validator(case["schema"]).validate(answer)
    outcome = judge_answer(json.dumps(answer, ensure_ascii=False), case, "stop")
    assert outcome.valid and outcome.right == outcome.fields


def test_every_schema_feature_appears_in_several_cases():
    def keywords(schema: Any) -> Counter:
        found: Counter = Counter()
        if isinstance(schema, dict):
            if isinstance(schema.get("type"), str):
                found[f"type:{schema['type']}"] += 1
            found.update(k for k in ("enum", "required", "pattern", "minimum") if k in schema)
            if schema.get("additionalProperties") is False:
                found["additionalProperties:false"] += 1
            for value in schema.values():
                found.update(keywords(value))
        elif isinstance(schema, list):
            for value in schema:
                found.update(keywords(value))
        return found

    per_feature: Counter = Counter()
    for case in _all_cases():
        per_feature.update(set(keywords(case["schema"]).elements()))
    nested = sum(
        any(p.get("type") in ("object", "array") for p in c["schema"]["properties"].values())
        for c in _all_cases()
    )
    assert nested >= 10
    for feature in ("type:array", "enum", "type:integer", "type:number", "type:boolean",
                    "required", "additionalProperties:false"):  # fmt: skip
        assert per_feature[feature] >= 5, (feature, per_feature)
