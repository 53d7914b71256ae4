"""The evaluation's metric functions and its data sets, offline (no models)."""

import json
import math
from collections import Counter

import jsonschema
import pytest

from benchmarks.eval import metrics
from benchmarks.eval.calibrate import (
    ACCURACY_SLACK,
    calibration_cases,
    choose_calibration,
    choose_thresholds,
    cross_validated,
    support_of,
)
from benchmarks.eval.optional_arguments import OPTIONAL_SETS, unstated_values
from benchmarks.eval.run_eval import (
    PARALLEL_SETS,
    load_jsonl,
    load_tools,
    summarise_groundedness,
    unparsed_call_in,
)

G, N, S = "grounded", "notGrounded", "notSure"

# ------------------------------------------------------------------ groundedness metrics


def test_balanced_accuracy_averages_the_recall_of_both_classes():
    labels = [G, G, G, G, N, N]
    predictions = [G, G, G, N, N, G]
    assert metrics.balanced_accuracy(labels, predictions) == pytest.approx((3 / 4 + 1 / 2) / 2)


def test_not_sure_counts_as_wrong_for_either_class():
    assert metrics.balanced_accuracy([G, N], [S, S]) == 0.0
    assert metrics.balanced_accuracy([G, N], [G, S]) == 0.5


def test_balanced_accuracy_with_one_class_or_none():
    assert metrics.balanced_accuracy([N, N], [N, G]) == 0.5
    assert math.isnan(metrics.balanced_accuracy([], []))
    with pytest.raises(ValueError):
        metrics.balanced_accuracy([G], [])


def test_threshold_verdict_band():
    assert metrics.threshold_verdict(0.7, 0.6, 0.4) == G
    assert metrics.threshold_verdict(0.6, 0.6, 0.4) == G
    assert metrics.threshold_verdict(0.5, 0.6, 0.4) == S
    assert metrics.threshold_verdict(0.39, 0.6, 0.4) == N


def test_groundedness_summary_splits_clear_ambiguous_and_long():
    def row(label, verdict, clear=True, long=False, lang="en", seconds=1.0):
        return {
            "label": label,
            "verdict": verdict,
            "clear": clear,
            "long_context": long,
            "language": lang,
            "category": "supported",
            "seconds": seconds,
            "prompt_tokens": 10,
        }

    rows = [
        row(G, G),
        row(N, S, lang="ko"),
        row(N, N, long=True, seconds=3.0),
        row("ambiguous", S, clear=False),
        row("ambiguous", G, clear=False),
    ]
    summary = summarise_groundedness(rows)
    assert summary["balanced_accuracy"] == pytest.approx((1 + 0.5) / 2)
    assert summary["not_sure_rate_clear"] == pytest.approx(1 / 3)
    assert summary["not_sure_rate_ambiguous"] == 0.5
    assert summary["balanced_accuracy_by_language"]["ko"] == 0.0
    assert summary["seconds_per_check_long"] == 3.0
    assert summary["seconds_per_check_short"] == 1.0


# ------------------------------------------------------------------ tool-call metrics

WEATHER = {
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    },
}
CONVERT = {
    "name": "convert",
    "parameters": {
        "type": "object",
        "properties": {"amount": {"type": "number"}, "code": {"type": "string"}},
        "required": ["amount"],
    },
}
TOOLS = {"get_weather": WEATHER, "convert": CONVERT}


@pytest.mark.parametrize(
    ("expected", "actual", "schema", "ok"),
    [
        ("Lisbon", " lisbon. ", {"type": "string"}, True),
        ("New York", "new   york", {"type": "string"}, True),
        ("ＳＥＯＵＬ", "seoul", {}, True),  # NFKC folds full-width letters
        ("celsius", "Celsius", {"enum": ["celsius", "fahrenheit"]}, False),  # enums are exact
        ("celsius", "celsius", {"enum": ["celsius", "fahrenheit"]}, True),
        (250, 250.0, {}, True),
        (250, "250", {}, False),
        (250, 251, {}, False),
        (True, 1, {}, False),
        ({"any_of": ["Busan", "부산"]}, "부산", {}, True),
        ({"any_of": ["Busan", "부산"]}, "Seoul", {}, False),
        ({"contains_all": ["framework", "13"]}, "Framework 13 laptop reviews", {}, True),
        ({"contains_all": ["framework", "13"]}, "Framework laptop", {}, False),
        ({"contains_all": ["x"]}, 5, {}, False),
    ],
)
def test_value_matching_rules(expected, actual, schema, ok):
    assert metrics.value_matches(expected, actual, schema) is ok


def test_unknown_rule_is_an_error():
    with pytest.raises(ValueError):
        metrics.value_matches({"regex": "x"}, "x")


def test_right_call_with_extra_valid_argument():
    outcome = metrics.judge_tool_case(
        {"name": "get_weather", "arguments": {"city": "Lisbon"}},
        [("get_weather", '{"city": "LISBON", "unit": "celsius"}')],
        TOOLS,
    )
    assert outcome == metrics.ToolOutcome(True, True, True, True, True, True)


def test_schema_violation_is_reported_but_arguments_are_still_compared():
    outcome = metrics.judge_tool_case(
        {"name": "get_weather", "arguments": {"city": "Lisbon"}},
        [("get_weather", '{"city": "Lisbon", "unit": "kelvin"}')],
        TOOLS,
    )
    assert outcome.parsed and not outcome.schema_valid
    assert outcome.right_function and outcome.right_arguments


def test_wrong_function_and_wrong_arguments():
    wrong_name = metrics.judge_tool_case(
        {"name": "convert", "arguments": {"amount": 5}}, [("get_weather", '{"city": "x"}')], TOOLS
    )
    assert not wrong_name.right_function and not wrong_name.right_arguments
    wrong_value = metrics.judge_tool_case(
        {"name": "convert", "arguments": {"amount": 5}}, [("convert", '{"amount": 6}')], TOOLS
    )
    assert wrong_value.right_function and not wrong_value.right_arguments


def test_unparseable_arguments_and_missed_call():
    broken = metrics.judge_tool_case(
        {"name": "convert", "arguments": {"amount": 5}}, [("convert", '{"amount": ')], TOOLS
    )
    assert not broken.parsed and not broken.schema_valid and not broken.right_arguments
    missed = metrics.judge_tool_case({"name": "convert", "arguments": {"amount": 5}}, [], TOOLS)
    assert missed == metrics.ToolOutcome(True, False, True, True, False, False)


def test_no_call_expected():
    assert metrics.judge_tool_case(None, [], TOOLS) == metrics.ToolOutcome(
        False, False, True, True, True, True
    )
    false_call = metrics.judge_tool_case(None, [("convert", '{"amount": 1}')], TOOLS)
    assert false_call.called and not false_call.right_function


def test_tool_summary_rates_use_the_right_denominators():
    outcomes = [
        metrics.ToolOutcome(True, True, True, True, True, True),
        metrics.ToolOutcome(True, True, True, False, True, False),
        metrics.ToolOutcome(True, False, True, True, False, False),
        metrics.ToolOutcome(False, True, True, True, False, False),
        metrics.ToolOutcome(False, False, True, True, True, True),
    ]
    summary = metrics.summarise_tool_outcomes(outcomes)
    assert summary["parse_rate"] == 1.0
    assert summary["schema_valid_rate"] == 0.8
    assert summary["right_function"] == pytest.approx(2 / 3)
    assert summary["right_arguments"] == pytest.approx(1 / 3)
    assert summary["false_call_rate"] == 0.5
    assert summary["missed_call_rate"] == pytest.approx(1 / 3)


def test_unparsed_call_detection():
    assert unparsed_call_in('<tool_call>{"name": "get_weather"', ["get_weather"])
    assert unparsed_call_in('{"name": "get_weather", "arguments": {}}', ["get_weather"])
    assert not unparsed_call_in('{"name": "Alice"}', ["get_weather"])
    assert not unparsed_call_in("It is sunny.", ["get_weather"])
    assert not unparsed_call_in(None, ["get_weather"])


# ------------------------------------------------------------------ retrieval metrics


def test_rank_recall_and_mrr():
    assert metrics.first_gold_rank(["a", "b", "c"], ["c", "b"]) == 2
    assert metrics.first_gold_rank(["a"], ["z"]) is None
    ranks = [1, 2, None, 1]
    assert metrics.recall_at_1(ranks) == 0.5
    assert metrics.mean_reciprocal_rank(ranks) == pytest.approx((1 + 0.5 + 0 + 1) / 4)


# ------------------------------------------------------------------ the data sets


def test_groundedness_set_shape_and_counts():
    cases = load_jsonl("groundedness.jsonl")
    assert len(cases) >= 120 + 8
    assert len({c["id"] for c in cases}) == len(cases)
    for case in cases:
        assert case["label"] in (G, N, "ambiguous")
        assert case["clear"] is (case["label"] != "ambiguous")
        assert case["category"] in (
            "supported",
            "paraphrase",
            "contradiction",
            "addition",
            "ambiguous",
        )
        assert case["language"] in ("en", "ko", "ja")
        assert case["context"].strip() and case["response"].strip()
    clear = [c for c in cases if c["clear"]]
    assert len(clear) >= 120
    categories = Counter(c["category"] for c in clear)
    assert (
        min(categories[k] for k in ("supported", "paraphrase", "contradiction", "addition")) >= 15
    )
    kinds = Counter(c["subcategory"] for c in clear if c["category"] == "contradiction")
    assert all(kinds[k] >= 5 for k in ("number", "date", "name", "negation"))
    languages = Counter(c["language"] for c in clear)
    assert languages["ko"] >= 15 and languages["ja"] >= 15
    labels = Counter(c["label"] for c in clear)
    assert labels[G] >= 45 and labels[N] >= 45
    long_cases = [c for c in clear if c["long_context"]]
    assert len(long_cases) >= 10
    # Over 2,000 tokens in Qwen's tokenizer; English runs about 4.3 characters a token.
    assert all(len(c["context"]) >= 9000 for c in long_cases)
    assert {c["position"] for c in long_cases} == {"early", "middle", "late"}
    assert 5 <= sum(not c["clear"] for c in cases)


def test_tool_call_set_shape_and_counts():
    tools = load_tools()
    assert len(tools) >= 5
    for tool in tools.values():
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
    cases = load_jsonl("tool_calls.jsonl")
    assert len(cases) >= 36
    assert len({c["id"] for c in cases}) == len(cases)
    languages = Counter(c["language"] for c in cases)
    assert languages["en"] >= 12 and languages["ko"] >= 10 and languages["ja"] >= 10
    plain = [c for c in cases if c["expected"] is None]
    assert 0.2 <= len(plain) / len(cases) <= 0.35
    assert len({c["expected"]["name"] for c in cases if c["expected"]}) >= 5
    for case in cases:
        assert set(case["tools"]) <= set(tools)
        if case["expected"] is None:
            continue
        name, arguments = case["expected"]["name"], case["expected"]["arguments"]
        assert name in case["tools"]
        parameters = tools[name]["function"]["parameters"]
        assert set(arguments) <= set(parameters["properties"])
        assert set(parameters["required"]) <= set(arguments)
        # Plain expected values must themselves be valid arguments.
        plain_values = {k: v for k, v in arguments.items() if not isinstance(v, dict)}
        jsonschema.validate(plain_values, {**parameters, "required": []})


def _plain_values(arguments: dict) -> dict:
    return {k: v for k, v in arguments.items() if not isinstance(v, dict)}


@pytest.mark.parametrize("section", sorted(PARALLEL_SETS))
def test_parallel_call_sets_shape(section):
    tools = load_tools()
    cases = load_jsonl(PARALLEL_SETS[section])
    assert len(cases) >= 6 and len({c["id"] for c in cases}) == len(cases)
    for case in cases:
        assert len(case["expected"]) >= 2 and set(case["tools"]) <= set(tools)
        for call in case["expected"]:
            assert call["name"] in case["tools"], case["id"]
            parameters = tools[call["name"]]["function"]["parameters"]
            assert set(parameters.get("required", [])) <= set(call["arguments"]), case["id"]
            jsonschema.validate(_plain_values(call["arguments"]), {**parameters, "required": []})


@pytest.mark.parametrize("section", sorted(OPTIONAL_SETS))
def test_optional_argument_sets_shape(section):
    tools = load_tools()
    cases = load_jsonl(OPTIONAL_SETS[section])
    assert len(cases) >= 12 and len({c["id"] for c in cases}) == len(cases)
    assert {c["language"] for c in cases} == {"en", "ko", "ja"}
    for case in cases:
        assert set(case["tools"]) <= set(tools), case["id"]
        offered = set()
        for call in case["expected"]:
            parameters = tools[call["name"]]["function"]["parameters"]
            assert set(parameters.get("required", [])) <= set(call["arguments"]), case["id"]
            jsonschema.validate(_plain_values(call["arguments"]), {**parameters, "required": []})
            offered |= set(parameters["properties"]) - set(parameters.get("required", []))
        # an unstated parameter is an optional one of an expected call, and expected nowhere
        assert set(case["unstated"]) <= offered, case["id"]
        assert not any(set(case["unstated"]) & set(c["arguments"]) for c in case["expected"])


def test_an_unstated_value_is_any_but_the_declared_default():
    functions = {name: tool["function"] for name, tool in load_tools().items()}
    calls = [
        ("find_root", '{"function": "x", "lower": 0, "upper": 1, "tolerance": 0.001}'),
        ("search_movies", '{"city": "A", "genre": "B", "max_results": 10, "min_rating": 7}'),
        ("find_hotels", '{"city": "A", "min_stars": 4}'),
        ("find_hotels", "not json"),
    ]
    unstated = ["tolerance", "max_results", "min_rating", "min_stars", "max_price"]
    assert unstated_values(unstated, calls, functions) == [
        "search_movies.min_rating=7",
        "find_hotels.min_stars=4",
    ]


def test_retrieval_set_shape_and_counts():
    corpus = load_jsonl("retrieval_corpus.jsonl")
    queries = load_jsonl("retrieval_queries.jsonl")
    ids = [p["id"] for p in corpus]
    assert len(ids) == len(set(ids)) >= 100
    assert len(queries) >= 60
    assert all(set(q["gold"]) <= set(ids) and q["gold"] for q in queries)
    for counted in (
        Counter(p["language"] for p in corpus),
        Counter(q["language"] for q in queries),
    ):
        assert set(counted) == {"en", "ko", "ja"} and min(counted.values()) >= 15


def test_the_committed_results_files_are_valid():
    from benchmarks.eval.run_eval import EVAL_DIR

    paths = sorted(EVAL_DIR.glob("results-*.json"))
    assert paths  # make eval's committed reports
    for path in paths:
        results = json.loads(path.read_text(encoding="utf-8"))
        assert results["profile"] in ("default", "small")


def _pairs(clear: list[tuple[str, float]], ambiguous: list[float]) -> list[dict]:
    rows = [{"label": label, "support": s, "clear": True} for label, s in clear]
    return rows + [{"label": "ambiguous", "support": s, "clear": False} for s in ambiguous]


# 40 grounded pairs from 0.6 up and 40 not grounded below 0.4, separated but for a grounded
# pair at 0.47 and a not grounded one at 0.52: the single best cut is wrong on one of them.
CLEAR = (
    [(G, 0.6 + i / 100) for i in range(40)]
    + [(N, 0.4 - i / 100) for i in range(40)]
    + [(G, 0.47), (N, 0.52)]
)


def test_a_not_sure_band_is_kept_where_the_ambiguous_pairs_fall():
    chosen = choose_thresholds(_pairs(CLEAR, [0.5, 0.49, 0.9]))
    assert (chosen["not_grounded_below"], chosen["grounded_at"]) == (0.435, 0.56)
    assert chosen["not_sure_rate_clear"] == 2 / 82
    assert chosen["balanced_accuracy"] >= chosen["best_single_cut_accuracy"] - ACCURACY_SLACK


def test_a_band_that_holds_no_ambiguous_pair_is_a_hedge_and_is_dropped():
    chosen = choose_thresholds(_pairs(CLEAR, [0.05, 0.95]))
    assert chosen["not_grounded_below"] == chosen["grounded_at"] == 0.56
    assert chosen["not_sure_rate_clear"] == 0.0
    assert chosen["balanced_accuracy"] == chosen["best_single_cut_accuracy"] == (1 + 40 / 41) / 2


def test_a_band_must_hold_three_times_the_ambiguous_share_of_the_clear_one():
    # Any band holding the ambiguous pair at 0.5 holds the clear one at 0.52 (1 of 82, 1.2%);
    # it would hold 1 of 40 ambiguous pairs (2.5%): more, but not three times more.
    ambiguous = [0.5] + [0.05 + i / 200 for i in range(20)] + [0.9 + i / 200 for i in range(19)]
    chosen = choose_thresholds(_pairs(CLEAR, ambiguous))
    assert chosen["not_grounded_below"] == chosen["grounded_at"]
    assert chosen["not_sure_rate_clear"] == 0.0


def _read(clear_support: dict[str, float], contrast_p_yes: float = 0.5) -> list[dict]:
    """A stored pair of one claim read against one chunk, each question's P(yes) given."""
    p_yes = {"support": clear_support["support"], "contrast": contrast_p_yes}
    return [{"claim": 0, "chunk": 0, "p_yes": p_yes}]


def _stored(fold: int, label: str, support: float, contrast: float = 0.5) -> dict:
    return {
        "id": f"{fold}-{label}-{support}-{contrast}",
        "fold": fold,
        "label": label,
        "clear": label != "ambiguous",
        "claims": 1,
        "readings": _read({"support": support}, contrast),
    }


def test_a_stored_pairs_support_replays_the_judges_rule():
    row = {
        "claims": 2,
        "readings": [
            {"claim": 0, "chunk": 0, "p_yes": {"support": 0.9, "contrast": 0.3}},
            {"claim": 0, "chunk": 1, "p_yes": {"support": 0.5, "contrast": 0.1}},
            {"claim": 1, "chunk": 1, "p_yes": {"support": 0.6, "contrast": 0.2}},
        ],
    }
    # Each claim's best chunk, the weakest claim: (0.6 + 0.8) / 2 against (0.9 + 0.7) / 2.
    assert support_of(row, ["support", "contrast"]) == pytest.approx(0.7)
    assert support_of(row, ["support"]) == pytest.approx(0.6)


def test_the_questions_that_separate_the_pairs_are_chosen():
    # The support question alone does not separate these pairs; its P(yes) and the contrast
    # question's P(no) together do.
    rows = [_stored(0, G, 0.7, 0.1), _stored(0, G, 0.6, 0.2), _stored(0, N, 0.7, 0.9)]
    rows += [_stored(0, N, 0.6, 0.8), _stored(0, "ambiguous", 0.6, 0.5)]
    chosen = choose_calibration(rows)
    assert chosen["questions"] == ["support", "contrast"]
    assert chosen["balanced_accuracy"] == 1.0
    # Where the support question alone separates them as well, the fewer questions win.
    simple = [_stored(0, G, 0.9), _stored(0, G, 0.8), _stored(0, N, 0.2), _stored(0, N, 0.1)]
    assert choose_calibration(simple)["questions"] == ["support"]


def test_each_fold_is_judged_by_a_calibration_chosen_on_the_others():
    # Folds 0-3 put the cut between 0.35 and 0.8. Fold 4 holds three not-grounded pairs at
    # 0.6-0.64 (one context the judge misreads): fitted without them, the cut calls them
    # grounded.
    rows = [
        _stored(fold, label, support)
        for fold in range(4)
        for label, support in ((G, 0.8), (G, 0.85), (N, 0.3), (N, 0.35), ("ambiguous", 0.5))
    ]
    rows += [_stored(4, N, support) for support in (0.6, 0.62, 0.64)]
    verdicts = cross_validated(rows)
    assert set(verdicts) == {r["id"] for r in rows}
    assert [verdicts[r["id"]] for r in rows if r["fold"] == 4] == [G, G, G]
    assert all(verdicts[r["id"]] == r["label"] for r in rows if r["fold"] < 4 and r["clear"])


def test_a_calibration_never_reads_the_test_split():
    cases = calibration_cases(["groundedness_v2.jsonl"])
    assert cases and {c["split"] for c in cases} == {"train"}
    assert {c["fold"] for c in cases} == set(range(5))
    first = calibration_cases(["groundedness.jsonl"])
    assert len(first) == len(load_jsonl("groundedness.jsonl"))


def test_the_first_sets_folds_keep_each_context_in_one_fold():
    cases = calibration_cases(["groundedness.jsonl", "groundedness_v2.jsonl"])
    folds: dict[str, set[int]] = {}
    for case in cases:
        folds.setdefault(case["context"], set()).add(case["fold"])
    assert all(len(f) == 1 for f in folds.values())
    assert {c["fold"] for c in cases if c["set"] == "groundedness.jsonl"} == set(range(5))
    assert len({c["id"] for c in cases}) == len(cases)  # ids kept apart by their set
