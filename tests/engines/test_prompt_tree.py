"""Prompts laid out as a token tree: shared beginnings once, each token seeing only its own
prompt's earlier tokens, at its own positions."""

import numpy as np
import pytest

from backend.engines.prompt_tree import PromptTreeBuilder


def tree_of(*prompts):
    builder = PromptTreeBuilder()
    for prompt in prompts:
        builder.add(prompt)
    return builder.build()


def seen_prompt(tree, end):
    """The tokens the token at ``end`` attends to, in position order: its own prompt."""
    seen = np.flatnonzero(tree.sees[end])
    return [tree.tokens[i] for i in sorted(seen, key=lambda i: tree.positions[i])]


def test_a_shared_beginning_is_laid_out_once():
    prompts = [[1, 2, 3, 4], [1, 2, 3, 5, 6], [1, 7]]
    tree = tree_of(*prompts)
    assert tree.tokens == [1, 2, 3, 4, 5, 6, 7]
    assert tree.positions == [0, 1, 2, 3, 3, 4, 1]
    assert not tree.is_chain
    for prompt, end in zip(prompts, tree.ends, strict=True):
        assert seen_prompt(tree, end) == prompt
        assert tree.positions[end] == len(prompt) - 1


def test_every_token_sees_exactly_its_ancestors():
    tree = tree_of([5, 6, 7], [5, 8, 9], [5, 6, 10])
    # 5:0 6:1 7:2 8:3 9:4 10:5
    expected = {0: {0}, 1: {0, 1}, 2: {0, 1, 2}, 3: {0, 3}, 4: {0, 3, 4}, 5: {0, 1, 5}}
    for row, ancestors in expected.items():
        assert set(np.flatnonzero(tree.sees[row])) == ancestors


def test_a_prompt_that_begins_another_adds_nothing_and_ends_inside_it():
    builder = PromptTreeBuilder()
    builder.add([1, 2, 3])
    assert builder.added_tokens([1, 2]) == 0
    assert builder.added_tokens([1, 2, 4]) == 1
    builder.add([1, 2])
    builder.add([1, 2, 3])  # the same prompt twice
    tree = builder.build()
    assert tree.tokens == [1, 2, 3] and tree.ends == [2, 1, 2]
    assert tree.is_chain
    assert len(builder) == 3 and builder.prompt_count == 3


def test_prompts_with_nothing_in_common_are_separate_chains():
    tree = tree_of([1, 2], [3, 4])
    assert tree.positions == [0, 1, 0, 1]
    assert not tree.sees[2, :2].any() and not tree.sees[0, 2:].any()


def test_an_empty_prompt_is_refused():
    with pytest.raises(ValueError, match="at least one token"):
        PromptTreeBuilder().add([])
