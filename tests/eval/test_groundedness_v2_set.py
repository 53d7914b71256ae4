"""The second groundedness calibration set (issue 19): its shape, counts and split, offline.

Lengths are checked in characters, a proxy for tokens: in the Qwen2.5 tokenizer English runs
about 4.1 characters a token and Korean and Japanese about 1.3, so 6,000-12,000 characters of
English and 2,500-5,000 of Korean or Japanese fall within 1,500-3,000 tokens.
"""

import re
from collections import Counter, defaultdict

import pytest

from benchmarks.eval.run_eval import load_jsonl

G, N, A = "grounded", "notGrounded", "ambiguous"
FIELDS = {
    "id",
    "language",
    "category",
    "subcategory",
    "long_context",
    "clear",
    "label",
    "context_id",
    "split",
    "fold",
    "wrong_sentence",
    "note",
    "context",
    "response",
}
CATEGORIES = {
    G: {"supported", "paraphrase", "inference"},
    N: {"contradiction", "addition"},
    A: {"ambiguous"},
}
LONG_CHARACTERS = {"en": (6_000, 12_000), "ko": (2_500, 5_000), "ja": (2_500, 5_000)}
SHORT_CHARACTERS = {"en": 1_500, "ko": 700, "ja": 700}
# A sentence ends at 。, or at . ! ? followed by a space, a closing quote or the end of the text.
_SENTENCE_END = re.compile(r"。|[.!?](?=\s|$|[\"'”’」])")


@pytest.fixture(scope="module")
def cases():
    return load_jsonl("groundedness_v2.jsonl")


def _sentences(text):
    return len(_SENTENCE_END.findall(text.strip()))


def test_every_row_has_the_fields_and_a_valid_label(cases):
    assert len({c["id"] for c in cases}) == len(cases)
    for case in cases:
        assert set(case) == FIELDS, case["id"]
        assert case["language"] in LONG_CHARACTERS
        assert case["label"] in CATEGORIES
        assert case["category"] in CATEGORIES[case["label"]], case["id"]
        assert case["clear"] is (case["label"] != A)
        assert case["context"].strip() and case["response"].strip()
        if case["category"] == "contradiction":
            assert case["subcategory"] in ("number", "date", "name", "negation")
        if case["label"] == A:
            assert case["subcategory"] in ("hedged", "partial", "assumption")


def test_not_grounded_rows_name_one_wrong_sentence_in_the_response(cases):
    for case in cases:
        if case["label"] == N:
            assert case["wrong_sentence"] in case["response"], case["id"]
            assert _sentences(case["wrong_sentence"]) == 1, case["id"]
        else:
            assert case["wrong_sentence"] is None, case["id"]


def test_ambiguous_rows_say_why(cases):
    for case in cases:
        if case["label"] == A:
            assert len(case["note"]) >= 30, case["id"]
        else:
            assert case["note"] is None, case["id"]


def test_wrong_sentence_is_not_always_last(cases):
    multi = [c for c in cases if c["label"] == N and _sentences(c["response"]) >= 2]
    last = [c for c in multi if c["response"].rstrip().endswith(c["wrong_sentence"])]
    assert len(multi) >= 0.8 * sum(c["label"] == N for c in cases)
    assert len(last) <= 0.5 * len(multi)


def test_context_lengths(cases):
    for case in cases:
        size = len(case["context"])
        if case["long_context"]:
            low, high = LONG_CHARACTERS[case["language"]]
            assert low <= size <= high, case["id"]
        else:
            assert size <= SHORT_CHARACTERS[case["language"]], case["id"]


def test_rows_sharing_a_context_share_its_id_split_and_fold(cases):
    by_text = defaultdict(set)
    by_id = defaultdict(set)
    for case in cases:
        assert (case["split"], case["fold"]) in {("test", None)} | {
            ("train", k) for k in range(5)
        }, case["id"]
        by_text[case["context"]].add(case["context_id"])
        by_id[case["context_id"]].add(
            (case["context"], case["split"], case["fold"], case["language"], case["long_context"])
        )
    assert all(len(ids) == 1 for ids in by_text.values())
    assert all(len(keys) == 1 for keys in by_id.values())


def test_both_splits_hold_every_language_long_and_short(cases):
    for split in ("train", "test"):
        strata = {(c["language"], c["long_context"]) for c in cases if c["split"] == split}
        assert strata == {(lang, long) for lang in LONG_CHARACTERS for long in (True, False)}
    test_share = sum(c["split"] == "test" for c in cases) / len(cases)
    assert 0.25 <= test_share <= 0.35
    folds = Counter(c["fold"] for c in cases if c["split"] == "train")
    assert set(folds) == set(range(5))


def test_counts_meet_the_issue_minimums(cases):
    assert len(cases) >= 230
    languages = Counter(c["language"] for c in cases)
    assert 0.45 <= languages["en"] / len(cases) <= 0.55
    assert languages["ko"] >= 0.2 * len(cases) and languages["ja"] >= 0.2 * len(cases)
    assert sum(c["long_context"] for c in cases) >= 60
    assert sum(c["label"] == A for c in cases) >= 36
    clear = [c for c in cases if c["clear"]]
    kinds = Counter(c["subcategory"] or c["category"] for c in clear)
    assert all(kinds[k] >= 10 for k in ("number", "name", "negation", "addition"))
    assert all(kinds[k] >= 20 for k in ("supported", "paraphrase", "inference"))
    multi = [c for c in cases if _sentences(c["response"]) >= 2]
    assert len(multi) >= 0.75 * len(cases)


def test_grounded_and_not_grounded_balance_within_language_and_length(cases):
    labels = Counter((c["language"], c["long_context"], c["label"]) for c in cases if c["clear"])
    for lang in LONG_CHARACTERS:
        for long in (True, False):
            grounded, not_grounded = labels[(lang, long, G)], labels[(lang, long, N)]
            assert grounded and abs(grounded - not_grounded) <= 0.1 * (grounded + not_grounded)
