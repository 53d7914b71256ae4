"""Splitting many texts into embedding requests within the API's limits, with no tokenizer:
the one planner the bulk runner and both adapters use."""

from __future__ import annotations

from backend.protocol.limits import (
    MAX_TOKENS_PER_EMBEDDING_REQUEST,
    TOKEN_MARGIN,
    plan_embedding_requests,
    token_upper_bound,
)


def test_the_bound_is_utf8_bytes_plus_a_margin():
    assert token_upper_bound("abc") == 3 + TOKEN_MARGIN
    assert token_upper_bound("日本") == 6 + TOKEN_MARGIN


def test_the_bound_covers_what_normalisation_makes_of_a_text():
    # NFKC turns one 3-byte character into 18 characters that a SentencePiece model reads
    expanded = "\ufdfa"
    assert token_upper_bound(expanded) >= len(expanded.encode()) + TOKEN_MARGIN
    assert token_upper_bound(expanded) > 18 + TOKEN_MARGIN
    assert token_upper_bound("ﬁ") >= token_upper_bound("fi")  # the ligature's 3 bytes stay


def test_requests_hold_at_most_100_strings_in_order():
    texts = [f"text {i}" for i in range(250)]
    requests = plan_embedding_requests(texts)
    assert [len(r) for r in requests] == [100, 100, 50]
    assert [t for r in requests for t in r] == texts
    assert plan_embedding_requests([]) == []


def test_requests_stay_under_the_token_limit():
    texts = ["x" * 3000] * 100  # 3,016 counted tokens each: 67 fit under 204,800
    requests = plan_embedding_requests(texts)
    assert [len(r) for r in requests] == [67, 33]
    for request in requests:
        assert sum(map(token_upper_bound, request)) < MAX_TOKENS_PER_EMBEDDING_REQUEST


def test_a_text_too_long_for_any_request_goes_alone():
    requests = plan_embedding_requests(["a", "b" * 300, "c"], max_tokens=100)
    assert requests == [["a"], ["b" * 300], ["c"]]
    assert plan_embedding_requests(["y" * 300_000, "z"]) == [["y" * 300_000], ["z"]]


def test_smaller_limits_are_honoured():
    assert [len(r) for r in plan_embedding_requests(list("abcdefg"), max_inputs=3)] == [3, 3, 1]
