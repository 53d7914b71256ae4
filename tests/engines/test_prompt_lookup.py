"""Drafts looked up in a generation's own tokens (``backend.engines.prompt_lookup``), offline."""

from __future__ import annotations

from backend.engines.prompt_lookup import looked_up_draft


def test_the_tokens_after_the_latest_earlier_run_of_the_last_three_are_drafted():
    tokens = [1, 2, 3, 4, 5, 9, 1, 2, 3, 6, 7, 8, 0, 2, 3]  # "2 3" twice; "0 2 3" nowhere
    assert looked_up_draft(tokens, 3) == [6, 7, 8]  # after the latest "2 3"
    assert looked_up_draft([1, 2, 3, 4, 5, 2, 3, 4, 1, 2, 3], 2) == [4, 5]  # "1 2 3" first


def test_a_draft_is_cut_at_its_size_and_at_the_end_of_the_tokens():
    assert looked_up_draft([5, 6, 7, 8, 5, 6], 4) == [7, 8, 5, 6]
    assert looked_up_draft([5, 6, 7, 5, 6], 4) == [7, 5, 6]


def test_a_single_token_or_an_unseen_run_drafts_nothing():
    assert looked_up_draft([1, 2, 3, 4, 3], 4) == []  # only "3" recurs
    assert looked_up_draft([1, 2, 3], 4) == []
    assert looked_up_draft([], 4) == []
