"""``TokenChooser``: a greedy opening, then tokens drawn as the request asks (offline)."""

from __future__ import annotations

import math

import pytest
import torch

from backend.engines.base import FavouredFirstToken, SamplingParams
from backend.engines.sampling import (
    REPEAT_ALLOWED,
    REPEAT_BASE,
    REPEAT_PENALTY,
    TokenChooser,
    repetition_penalties,
)

# Token 0 is the most likely (p ~ 0.23); the other nine share the rest, so a draw at
# temperature 1.0 rarely picks token 0 many times running.
LOGITS = torch.tensor([1.0] + [0.0] * 9)


def _choices(params: SamplingParams, steps: int, seed: int = 3) -> list[int]:
    choose = TokenChooser(params, generator=torch.Generator().manual_seed(seed))
    return [choose(LOGITS.clone()) for _ in range(steps)]


def test_the_opening_tokens_are_the_most_likely_ones_then_tokens_are_drawn():
    sampled = SamplingParams(max_new_tokens=40, temperature=1.0)
    opened = SamplingParams(max_new_tokens=40, temperature=1.0, greedy_opening=2)
    for seed in range(20):
        choices = _choices(opened, 40, seed)
        assert choices[:2] == [0, 0]
        assert set(choices[2:]) != {0}  # the rest is drawn
    # Without an opening the first draws differ from the most likely token somewhere.
    assert any(_choices(sampled, 2, seed) != [0, 0] for seed in range(20))


def test_after_the_opening_the_draws_are_those_of_the_same_seed_without_it():
    # The greedy opening takes nothing from the generator: the rest of a seeded answer is
    # the same draw sequence as a seeded answer without the opening.
    sampled = SamplingParams(max_new_tokens=40, temperature=1.0)
    opened = SamplingParams(max_new_tokens=40, temperature=1.0, greedy_opening=1)
    assert _choices(opened, 30)[1:] == _choices(sampled, 29)


def test_the_opening_ends_once_its_tokens_carry_their_decision():
    seen: list[list[int]] = []

    def decided(tokens):
        seen.append(list(tokens))
        return len(tokens) == 3

    opened = SamplingParams(
        max_new_tokens=40, temperature=1.0, greedy_opening=16, opening_decided=decided
    )
    for seed in range(20):
        seen.clear()
        choices = _choices(opened, 40, seed)
        assert choices[:3] == [0, 0, 0]
        assert set(choices[3:]) != {0}  # drawn from the decision on, not for 16 tokens
        # Asked before each opening token after the first, and never again once decided.
        assert seen == [[0], [0, 0], [0, 0, 0]]
    # Draws after it are those of the same seed without the opening, as for a fixed one.
    assert _choices(opened, 30)[3:] == _choices(SamplingParams(40, temperature=1.0), 27)


def test_greedy_requests_are_unchanged():
    greedy = SamplingParams(max_new_tokens=5, temperature=0.0, greedy_opening=3)
    assert _choices(greedy, 5) == [0] * 5


class _StructureMask:
    """A stand-in ``TokenMask``: allows every token; tokens in ``structure`` lay out JSON."""

    def __init__(self, structure: set[int]) -> None:
        self.structure = structure
        self.accepted: list[int] = []

    def apply(self, logits: torch.Tensor) -> None:
        pass

    def writes_structure(self, token: int) -> bool:
        return token in self.structure

    #: No string's end is told apart here (the real masks: tests/engines/test_json_bounds.py).
    in_value_string = False

    def string_endings(self, token: int) -> None:
        return None

    @property
    def string_tokens(self) -> list[int]:
        """Everything written is one open string's value."""
        return self.accepted

    def accept(self, token: int) -> None:
        self.accepted.append(token)


def test_a_constrained_answer_takes_structure_greedily_and_draws_values():
    sampled = SamplingParams(max_new_tokens=40, temperature=1.0)
    # Token 0 (the most likely) closes the value: taken every time, whatever the draw.
    closing = _StructureMask({0, 1})
    choose = TokenChooser(sampled, closing, torch.Generator().manual_seed(0))
    assert [choose(LOGITS.clone()) for _ in range(30)] == [0] * 30
    # Token 0 writes a value: values are drawn, and never the structure tokens 1 and 2,
    # which the model does not find most likely.
    writing = _StructureMask({1, 2})
    for seed in range(5):
        choose = TokenChooser(sampled, writing, torch.Generator().manual_seed(seed))
        choices = [choose(LOGITS.clone()) for _ in range(40)]
        assert not {1, 2} & set(choices)
        assert len(set(choices)) > 1
        assert writing.accepted[-40:] == choices


def test_structure_is_drawn_when_unconstrained():
    sampled = SamplingParams(max_new_tokens=40, temperature=1.0)
    choose = TokenChooser(sampled, None, torch.Generator().manual_seed(0))
    assert {1, 2} & {choose(LOGITS.clone()) for _ in range(60)}


def test_a_token_that_would_repeat_a_run_is_penalised_by_the_runs_length():
    # The answer ends with 1 2 3 4, written before and followed by 5 there: a run of four.
    assert repetition_penalties([1, 2, 3, 4, 5, 1, 2, 3, 4]) == {
        5: REPEAT_PENALTY * REPEAT_BASE ** (4 - REPEAT_ALLOWED)
    }
    # A run shorter than REPEAT_ALLOWED, or none: nothing.
    assert repetition_penalties([7, 8, 9, 7]) == {}
    assert repetition_penalties([1, 2, 3]) == {}


def test_a_constrained_answer_does_not_run_a_loop_but_free_text_is_drawn_as_it_comes():
    # A "model" that likes tokens 1-4 in turn, each 900 times more than all the others
    # together: drawn at temperature 1.0 it writes 1 2 3 4 1 2 3 4 ... (a token in 900 off).
    def looping(history: list[int]) -> torch.Tensor:
        logits = torch.zeros(10)
        logits[1 + len(history) % 4] = 9.0
        return logits

    sampled = SamplingParams(max_new_tokens=40, temperature=1.0)
    for seed in range(5):
        for mask, loops in ((_StructureMask(set()), False), (None, True)):
            choose = TokenChooser(sampled, mask, torch.Generator().manual_seed(seed))
            history: list[int] = []
            for _ in range(40):
                history.append(choose(looping(history)))
            three_copies = any(history[k : k + 12] == [1, 2, 3, 4] * 3 for k in range(29))
            # The penalty outweighs the model's liking before a third copy in a row.
            assert three_copies == loops, history


def test_a_batchs_argmax_is_taken_where_the_choice_is_plainly_greedy():
    # The slot runner reads every row's argmax in one copy and passes it as ``best``.
    best = int(torch.argmax(LOGITS))
    greedy = TokenChooser(SamplingParams(max_new_tokens=5, temperature=0.0))
    assert [greedy(LOGITS.clone(), best) for _ in range(3)] == [best] * 3
    # With log-probabilities the token is scored on the logits, as without ``best``.
    scored = TokenChooser(SamplingParams(max_new_tokens=5, temperature=0.0, top_logprobs=2))
    alone = TokenChooser(SamplingParams(max_new_tokens=5, temperature=0.0, top_logprobs=2))
    assert scored(LOGITS.clone(), best) == alone(LOGITS.clone())
    # A sampled choice draws from the logits whatever ``best`` says, after a greedy opening.
    opened = SamplingParams(max_new_tokens=40, temperature=1.0, greedy_opening=1)
    generator = torch.Generator().manual_seed(3)
    given = TokenChooser(opened, generator=generator)
    assert [given(LOGITS.clone(), best) for _ in range(30)] == _choices(opened, 30)


# Tokens 1 and 2 hold 0.3 of the probability together; token 0 alone is the likeliest.
SPLIT = torch.log(torch.tensor([0.4, 0.15, 0.15, 0.1, 0.1, 0.1]))


@pytest.mark.parametrize(("share", "first"), [(0.1, 1), (0.29, 1), (0.31, 0), (1.01, 0)])
def test_a_favoured_first_token_is_taken_when_its_kind_holds_the_share(share, first):
    rule = FavouredFirstToken(frozenset({1, 2}), share)
    for temperature in (0.0, 1.0):
        params = SamplingParams(
            max_new_tokens=5, temperature=temperature, greedy_opening=3, first_token=rule
        )
        choose = TokenChooser(params, generator=torch.Generator().manual_seed(0))
        # Also where the runner passes the batch's argmax (token 0) as ``best``.
        assert choose(SPLIT.clone(), 0) == first
        # Only the first token: the opening goes on greedily.
        assert [choose(SPLIT.clone()) for _ in range(2)] == [0, 0]


def test_below_its_share_the_likeliest_other_token_is_taken():
    # The favoured kind is the likeliest token (0.4) but holds less than the share asked.
    rule = FavouredFirstToken(frozenset({0}), 0.5)
    choose = TokenChooser(SamplingParams(max_new_tokens=5, first_token=rule))
    assert choose(SPLIT.clone()) in (1, 2)
    scored = TokenChooser(SamplingParams(max_new_tokens=5, first_token=rule, top_logprobs=1))
    token = scored(SPLIT.clone())
    assert token in (1, 2) and abs(token.logprob - math.log(0.15)) < 1e-5
