"""Prompts laid out as a token tree and scored in passes: shared beginnings once, each token
seeing only its own prompt's earlier tokens, at its own positions."""

import random

import numpy as np
import pytest

from backend.engines.prompt_tree import PromptTreeBuilder, shared_prefix_groups, suffix_batches


def builder_of(*prompts):
    builder = PromptTreeBuilder()
    for prompt in prompts:
        builder.add(prompt)
    return builder


def replayed(passes):
    """What each prompt's last token sees, replaying the passes over a cache as the runner
    does: (tokens, positions) by prompt number."""
    cache: list[tuple[int, int]] = []
    seen = {}
    for scoring in passes:
        cache = cache[: scoring.keep]
        pairs = list(zip(scoring.tokens, scoring.positions, strict=True))
        for number, row in scoring.ends:
            assert number not in seen  # every prompt is scored once
            visible = cache + [pairs[j] for j in np.flatnonzero(scoring.sees[row])]
            seen[number] = ([t for t, _ in visible], [p for _, p in visible])
        cache = cache + pairs
    return seen


def assert_scores_each_prompt_as_alone(prompts, passes):
    seen = replayed(passes)
    assert sorted(seen) == list(range(len(prompts)))
    for number, prompt in enumerate(prompts):
        tokens, positions = seen[number]
        assert tokens == list(prompt)
        assert positions == list(range(len(prompt)))


def test_a_shared_beginning_is_laid_out_once_in_one_pass():
    prompts = [[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 7]]
    [scoring] = builder_of(*prompts).passes(most_tokens=100)
    assert scoring.keep == 0
    assert scoring.tokens == [1, 2, 3, 4, 5, 6, 7]
    assert scoring.positions == [0, 1, 2, 3, 3, 4, 1]
    assert not scoring.is_chain
    assert_scores_each_prompt_as_alone(prompts, [scoring])


def test_every_token_sees_exactly_its_ancestors():
    [scoring] = builder_of([5, 6, 7], [5, 8, 9], [5, 6, 10]).passes(most_tokens=100)
    # 5:0 6:1 7:2 8:3 9:4 10:5
    expected = {0: {0}, 1: {0, 1}, 2: {0, 1, 2}, 3: {0, 3}, 4: {0, 3, 4}, 5: {0, 1, 5}}
    for row, ancestors in expected.items():
        assert set(np.flatnonzero(scoring.sees[row])) == ancestors


def test_a_prompt_that_begins_another_adds_nothing_and_ends_inside_it():
    builder = PromptTreeBuilder()
    builder.add([1, 2, 3])
    assert builder.added_tokens([1, 2]) == 0
    assert builder.added_tokens([1, 2, 4]) == 1
    builder.add([1, 2])
    builder.add([1, 2, 3])  # the same prompt twice
    [scoring] = builder.passes(most_tokens=100)
    assert scoring.tokens == [1, 2, 3] and sorted(scoring.ends) == [(0, 2), (1, 1), (2, 2)]
    assert scoring.is_chain
    assert len(builder) == 3


def test_a_large_tree_is_walked_with_the_path_above_each_part_cached():
    instruction = list(range(100, 140))
    chunks = [list(range(1000 * c, 1000 * c + 30)) for c in (1, 2, 3)]
    claims = [[7, 8], [9], [10, 11, 12]]
    prompts = [instruction + chunk + claim for chunk in chunks for claim in claims]
    passes = builder_of(*prompts).passes(most_tokens=40)
    # The instruction once, as a run into the cache; then each chunk with its claims.
    assert passes[0].tokens == instruction and passes[0].is_chain
    assert all(scoring.keep == len(instruction) for scoring in passes[1:])
    assert sum(len(scoring.tokens) for scoring in passes) == len(instruction) + 3 * (30 + 6)
    assert_scores_each_prompt_as_alone(prompts, passes)


@pytest.mark.parametrize("most_tokens", [1, 3, 8, 1000])
def test_random_trees_score_every_prompt_as_alone(most_tokens):
    generator = random.Random(most_tokens)
    prompts = []
    for _ in range(30):
        base = generator.choice(prompts) if prompts and generator.random() < 0.7 else []
        cut = generator.randint(0, len(base))
        prompts.append(
            base[:cut] + [generator.randint(0, 5) for _ in range(generator.randint(1, 8))]
        )
    passes = builder_of(*prompts).passes(most_tokens=most_tokens)
    assert_scores_each_prompt_as_alone(prompts, passes)
    for scoring in passes:
        assert len(scoring.tokens) <= most_tokens or scoring.is_chain


def test_an_empty_prompt_is_refused():
    with pytest.raises(ValueError, match="at least one token"):
        PromptTreeBuilder().add([])


def test_prompts_are_grouped_by_the_beginning_they_share_with_short_ends():
    lead = list(range(100, 140))
    chunk_a, chunk_b = list(range(200, 260)), list(range(300, 350))
    ends = [[1, 2, 3], [1, 2, 4], [5]]
    prompts = [lead + chunk_b + ends[0], lead + chunk_a + ends[0]]
    prompts += [lead + chunk_a + end for end in ends[1:]] + [lead + chunk_b + ends[2], [700, 800]]
    groups = shared_prefix_groups(prompts, max_suffix=10)
    assert groups == [
        (len(lead + chunk_a), [1, 2, 3]),  # each chunk's readings share lead and chunk
        (len(lead + chunk_b), [0, 4]),
        (1, [5]),  # alone: all but its last token
    ]
    for length, members in groups:
        assert all(prompts[m][:length] == prompts[members[0]][:length] for m in members)
        assert all(1 <= len(prompts[m]) - length <= 10 for m in members)
    # With longer ends allowed, the lead alone is shared by all the readings.
    assert shared_prefix_groups(prompts[:5], max_suffix=100) == [(len(lead), [1, 2, 3, 0, 4])]


def test_identical_prompts_share_all_but_their_last_token():
    assert shared_prefix_groups([[4, 5, 6], [4, 5, 6]], max_suffix=3) == [(2, [0, 1])]


def test_suffixes_are_cut_into_evaluations_by_sequences_and_tokens():
    suffixes = [[1] * n for n in (3, 3, 3, 1, 5)]
    assert [[len(s) for s in b] for b in suffix_batches(suffixes, 2, 6)] == [[3, 3], [3, 1], [5]]
    assert [[len(s) for s in b] for b in suffix_batches(suffixes, 8, 7)] == [[3, 3], [3, 1], [5]]
    assert suffix_batches([], 4, 10) == []
