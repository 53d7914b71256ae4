"""Drafts verified in one evaluation (``BatchingRunner._verify_draft``): a generation given
the tokens it is likely to write keeps the ones its own choices agree with, in fewer calls,
and writes exactly what it writes without a draft. Offline, against the runner tests'
stand-in for llama.cpp, whose cache refuses any evaluation that does not follow it (so rows
of a missed draft left in the cache fail loudly)."""

from __future__ import annotations

import numpy as np
import pytest

from backend.engines.llamacpp_runner import FIRST_DRAFT_WINDOW
from tests.engines.test_llamacpp_runner import (
    END,
    VOCAB,
    expected_answer,
    greedy,
    run_together,
)

PROMPT = list(range(1, 20))


def generate(runner, prompt, budget, draft=(), choose=greedy):
    ends = frozenset({END})
    return list(runner.generate(prompt, budget, choose, lambda: False, ends, 0, draft))


def test_a_draft_the_model_agrees_with_is_kept_in_few_evaluations(make_runner):
    runner, native = make_runner(slots=2)
    answer = expected_answer(PROMPT, 30)
    assert generate(runner, PROMPT, 30, draft=answer) == answer
    # The prompt, then the last token with the next 4, 6, 13 and 3 draft tokens (at least
    # FIRST_DRAFT_WINDOW, else as many as written so far): 4 evaluations instead of 29.
    assert native.batch_sizes == [len(PROMPT), 5, 7, 14, 4]
    assert native.kv[0] == [(i, t) for i, t in enumerate([*PROMPT, *answer[:-1]])]


@pytest.mark.parametrize("miss", [0, 1, 3, 7, 12])
def test_a_draft_that_misses_costs_its_rows_and_changes_no_token(make_runner, miss):
    runner, native = make_runner(slots=2)
    answer = expected_answer(PROMPT, 20)
    draft = list(answer)
    draft[miss] = draft[miss] % (VOCAB - 1) + 1  # a token the model does not choose there
    assert generate(runner, PROMPT, 20, draft=draft) == answer
    # Decoded one token a call after the miss, on a cache that holds exactly the answer.
    assert native.batch_sizes[-(20 - miss - 1) :] == [1] * (20 - miss - 1)
    assert native.kv[0] == [(i, t) for i, t in enumerate([*PROMPT, *answer[:-1]])]
    # The next request reuses that cache as it would any other.
    longer = [*PROMPT, *answer, 7]
    assert generate(runner, longer, 3) == expected_answer(longer, 3)


def test_the_draft_stops_at_the_budget_and_at_the_end(make_runner):
    runner, _ = make_runner(slots=2)
    answer = expected_answer(PROMPT, 12)
    assert generate(runner, PROMPT, 3, draft=answer) == answer[:3]
    ending = [*answer[:2], END]
    calls = []

    def end_third(logits: np.ndarray) -> int:
        calls.append(greedy(logits))
        return END if len(calls) == 3 else calls[-1]

    assert generate(runner, PROMPT, 12, draft=[*ending, 5, 5], choose=end_third) == ending


def test_each_row_is_chosen_by_the_request_s_own_chooser_in_order(make_runner):
    """A stateful chooser (a constraint, a seeded draw) sees the rows one by one, each after
    the tokens it chose before, as in decode steps."""
    runner, _ = make_runner(slots=2)
    answer = expected_answer(PROMPT, 10)
    seen: list[int] = []

    def recording(logits: np.ndarray) -> int:
        seen.append(greedy(logits))
        return seen[-1]

    assert generate(runner, PROMPT, 10, draft=answer, choose=recording) == answer == seen


def test_a_drafted_generation_runs_beside_others_and_neither_changes(make_runner):
    runner, native = make_runner(slots=2)
    prompts = [PROMPT, [4] * 11]
    drafts = [expected_answer(PROMPT, 2 * FIRST_DRAFT_WINDOW + 9), ()]
    jobs = [lambda i=i: generate(runner, prompts[i], 40, draft=drafts[i]) for i in range(2)]
    answers = run_together(runner, native, jobs)
    assert answers == [expected_answer(prompt, 40) for prompt in prompts]
