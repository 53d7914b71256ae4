"""Many prompts as one token tree, for scoring them in one forward pass that evaluates each
shared beginning once.

The groundedness judge's prompts repeat each other: every prompt of a question starts with the
same instruction (and worked examples), every claim read against a chunk repeats the chunk, and
concurrent checks repeat the instructions again. Laid out as a trie, each distinct prefix is
one run of tokens; a token attends to itself and its ancestors only (a tree attention mask,
as in SpecInfer's and Medusa's tree decoding) and keeps its position in its own prompt, so the
last token of every prompt sees exactly the tokens it would see alone, at the same positions.
One forward pass over the tree then gives each prompt's next-token logits, with the shared
tokens computed once instead of once per prompt.

Pure bookkeeping (token ids in, index arrays out): the runner turns it into tensors
(``backend.engines.transformers_runner``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PromptTree:
    """Prompts laid out as one sequence of their distinct tokens."""

    #: The distinct tokens, each after its parent (the token before it in its prompts).
    tokens: list[int]
    #: Each token's index within the prompts it belongs to (its depth in the tree).
    positions: list[int]
    #: ``sees[i, j]``: token ``i`` attends to token ``j`` (``j`` is ``i`` or an ancestor).
    sees: np.ndarray
    #: Where each prompt's last token is, in the order the prompts were added.
    ends: list[int]

    @property
    def is_chain(self) -> bool:
        """Whether the tree is one chain of tokens (an ordinary causal prompt: each prompt
        is a beginning of the longest)."""
        return len(self.tokens) == len(self.positions) and all(
            p == i for i, p in enumerate(self.positions)
        )


class PromptTreeBuilder:
    """Adds prompts to a tree one at a time; ``added_tokens`` tells what one would cost."""

    def __init__(self) -> None:
        self._tokens: list[int] = []
        self._positions: list[int] = []
        #: (parent index or -1, token) -> index of that token in the tree.
        self._children: dict[tuple[int, int], int] = {}
        #: Each prompt's path of indices, and how many of its tokens it added itself.
        self._paths: list[tuple[list[int], int]] = []

    def __len__(self) -> int:
        """Tokens in the tree so far."""
        return len(self._tokens)

    @property
    def prompt_count(self) -> int:
        return len(self._paths)

    def _shared(self, prompt: Sequence[int]) -> list[int]:
        """Indices of the prompt's longest beginning already in the tree."""
        path: list[int] = []
        parent = -1
        for token in prompt:
            node = self._children.get((parent, int(token)))
            if node is None:
                break
            path.append(node)
            parent = node
        return path

    def added_tokens(self, prompt: Sequence[int]) -> int:
        """How many tokens adding ``prompt`` would add to the tree."""
        return len(prompt) - len(self._shared(prompt))

    def add(self, prompt: Sequence[int]) -> None:
        """Add a prompt (at least one token)."""
        if not prompt:
            raise ValueError("a prompt needs at least one token")
        path = self._shared(prompt)
        shared = len(path)
        parent = path[-1] if path else -1
        for position in range(shared, len(prompt)):
            token = int(prompt[position])
            node = len(self._tokens)
            self._tokens.append(token)
            self._positions.append(position)
            self._children[(parent, token)] = node
            path.append(node)
            parent = node
        self._paths.append((path, shared))

    def build(self) -> PromptTree:
        size = len(self._tokens)
        sees = np.zeros((size, size), dtype=bool)
        for path, shared in self._paths:
            if shared == len(path):
                continue  # every token was already there, with its ancestors
            indices = np.asarray(path)
            # Row of the prompt's token at position p sees the path's tokens 0..p.
            rows = np.arange(shared, len(path))
            sees[np.ix_(indices[shared:], indices)] = np.arange(len(path))[None, :] <= rows[:, None]
        return PromptTree(
            tokens=list(self._tokens),
            positions=list(self._positions),
            sees=sees,
            ends=[path[-1] for path, _ in self._paths],
        )
