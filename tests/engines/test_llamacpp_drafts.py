"""Drafts verified in one evaluation (``backend.engines.llamacpp_drafts``): a generation given
the tokens it is likely to write keeps the ones its own choices agree with, in fewer calls,
and writes exactly what it writes without a draft. Offline, against the runner tests'
stand-in for llama.cpp, whose cache refuses any evaluation that does not follow it (so rows
of a missed draft left in the cache fail loudly)."""

from __future__ import annotations

import numpy as np
import pytest

from backend.engines.llamacpp_drafts import FIRST_DRAFT_WINDOW
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


def scripted(tokens: list[int]):
    """A chooser that writes ``tokens`` whatever the rows say: a model copying its prompt."""
    chosen: list[int] = []

    def choose(logits: np.ndarray) -> int:
        chosen.append(tokens[len(chosen)])
        return chosen[-1]

    return choose


def looking_up(runner, prompt, script):
    ends = frozenset({END})
    choose = scripted(script)
    return list(runner.generate(prompt, 20, choose, lambda: False, ends, lookup=True))


COPIED = [50, 51, 52, 53, 54, 55, 56, 57]
COPYING_PROMPT = [*COPIED, 1, 2, 3]


def test_a_generation_that_copies_its_prompt_checks_drafts_looked_up_there(make_runner):
    """Once its last two tokens ran earlier, the generation checks the FIRST_DRAFT_WINDOW
    tokens that followed them in one evaluation, and keeps those it chooses too."""
    runner, native = make_runner(slots=2)
    assert looking_up(runner, COPYING_PROMPT, [*COPIED, END]) == [*COPIED, END]
    # The prompt; "50" alone has no earlier run; after "50 51", 52-55 drafted and kept (and
    # 56 chosen from the last row); after "55 56", 57 kept and the end chosen over "1".
    assert native.batch_sizes == [len(COPYING_PROMPT), 1, 5, 5]
    assert native.kv[0] == [(i, t) for i, t in enumerate([*COPYING_PROMPT, *COPIED])]


def test_a_draft_looked_up_that_misses_changes_no_token(make_runner):
    runner, native = make_runner(slots=2)
    script = [50, 51, 52, 99, 98, END]
    assert looking_up(runner, COPYING_PROMPT, script) == script
    assert native.batch_sizes == [len(COPYING_PROMPT), 1, 5, 1, 1]
    assert native.kv[0] == [(i, t) for i, t in enumerate([*COPYING_PROMPT, *script[:-1]])]


def test_drafts_are_looked_up_only_for_a_request_running_alone(make_runner):
    """Beside another generation it decodes in their shared evaluations."""
    runner, native = make_runner(slots=2)
    jobs = [
        lambda: looking_up(runner, COPYING_PROMPT, [*COPIED, END]),
        lambda: generate(runner, [4] * 11, 12),
    ]
    answers = run_together(runner, native, jobs)
    assert answers == [[*COPIED, END], expected_answer([4] * 11, 12)]
    prompts = [size for size in native.batch_sizes if size == len(COPYING_PROMPT)]
    assert len(prompts) == 2  # the two prompts (both 11 tokens); no draft checked
    assert max(size for size in native.batch_sizes if size != len(COPYING_PROMPT)) <= 2


def forcing(answer: list[int], at: set[int], wrong: bool = False):
    """A chooser that chooses greedily and what a grammar would force after it: the next
    three tokens of ``answer`` once ``at`` holds the count chosen so far (``wrong``: tokens
    the model does not choose there)."""
    chosen: list[int] = []

    def choose(logits: np.ndarray) -> int:
        chosen.append(greedy(logits))
        return chosen[-1]

    def forced() -> list[int]:
        n = len(chosen)
        if n not in at:
            return []
        tokens = answer[n : n + 3]
        return [t % (VOCAB - 1) + 1 for t in tokens] if wrong else tokens

    return choose, forced


def constrained(runner, prompt, budget, choose, forced):
    ends = frozenset({END})
    return list(runner.generate(prompt, budget, choose, lambda: False, ends, forced=forced))


def test_the_tokens_a_constraint_forces_are_checked_as_a_draft(make_runner):
    """Where the grammar allows one text alone (a member's name), its tokens are checked in
    one evaluation with the last token, and the rest decoded as before."""
    runner, native = make_runner(slots=2)
    answer = expected_answer(PROMPT, 16)
    choose, forced = forcing(answer, at={2, 10})
    assert constrained(runner, PROMPT, 16, choose, forced) == answer
    # The prompt; token 1 decoded; tokens 2-4 forced and kept, 5 chosen from the last row;
    # 6-9 decoded; 10-12 forced and kept, 13 chosen; 14 and 15 decoded.
    assert native.batch_sizes == [len(PROMPT), 1, 4, 1, 1, 1, 1, 4, 1, 1]
    assert native.kv[0] == [(i, t) for i, t in enumerate([*PROMPT, *answer[:-1]])]


def test_forced_tokens_the_model_would_not_choose_change_no_token(make_runner):
    runner, native = make_runner(slots=2)
    answer = expected_answer(PROMPT, 12)
    choose, forced = forcing(answer, at={3}, wrong=True)
    assert constrained(runner, PROMPT, 12, choose, forced) == answer
    assert native.batch_sizes == [len(PROMPT), 1, 1, 4, *[1] * 8]
    assert native.kv[0] == [(i, t) for i, t in enumerate([*PROMPT, *answer[:-1]])]


def test_forced_tokens_are_checked_only_for_a_request_running_alone(make_runner):
    runner, native = make_runner(slots=2)
    answer = expected_answer(PROMPT, 12)
    choose, forced = forcing(answer, at=set(range(1, 12)))
    jobs = [
        lambda: constrained(runner, PROMPT, 12, choose, forced),
        lambda: generate(runner, [4] * 11, 12),
    ]
    assert run_together(runner, native, jobs) == [answer, expected_answer([4] * 11, 12)]
    decoded = [size for size in native.batch_sizes if size not in (len(PROMPT), 11)]
    assert max(decoded) <= 2  # decode steps, one token or both requests' one each


def test_forced_text_that_missed_is_not_checked_again_within_it(make_runner):
    """A model that writes the forced text in other tokens (an indent a space a token) would
    miss a draft at every step; after a miss, the forced text is checked again only once the
    model has written as many tokens as the draft had left."""
    runner, native = make_runner(slots=2)
    answer = expected_answer(PROMPT, 12)
    choose, forced = forcing(answer, at=set(range(1, 12)), wrong=True)
    assert constrained(runner, PROMPT, 12, choose, forced) == answer
    # Missed at tokens 1, 5 and 9 (the last with room for two), each followed by the three
    # tokens its draft had left decoded one a call.
    assert native.batch_sizes == [len(PROMPT), 4, 1, 1, 1, 4, 1, 1, 1, 3, 1, 1]
    assert native.kv[0] == [(i, t) for i, t in enumerate([*PROMPT, *answer[:-1]])]
