"""Many prompts as one token tree, for scoring them in a few forward passes that evaluate
each shared beginning once.

The groundedness judge's prompts repeat each other: every prompt of a question starts with the
same instruction (and worked examples), every claim read against a chunk repeats the chunk, and
concurrent checks repeat the instructions again. Laid out as a trie, each distinct prefix is
one run of tokens; a token attends to itself and its ancestors only (a tree attention mask,
as in SpecInfer's and Medusa's tree decoding) and keeps its position in its own prompt, so the
last token of every prompt sees exactly the tokens it would see alone, at the same positions.
One forward pass over the tree then gives each prompt's next-token logits, with the shared
tokens computed once instead of once per prompt.

But attention over a part costs its tokens times every token they see, masked or not: one
pass over the whole tree of a long check (3,500 distinct tokens) ran at half the tokens/s of
its prompts one by one. So a large tree is walked in parts (``PromptTreeBuilder.passes``),
with the path above each part in the KV cache. Pure bookkeeping (token ids in, index arrays
out): the runner turns it into tensors (``backend.engines.transformers_runner``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScoringPass:
    """One forward pass over part of the tree, on top of the KV cache of the path above it."""

    #: Cache positions kept from the passes before (the path above this part); the rest is
    #: cut off first.
    keep: int
    #: The part's tokens, each after its parent, and their positions in their prompts.
    tokens: list[int]
    positions: list[int]
    #: ``sees[i, j]``: token ``i`` attends to the part's token ``j`` (besides the path kept).
    sees: np.ndarray
    #: (prompt number, row in this part) of each prompt whose last token is here.
    ends: list[tuple[int, int]]

    @property
    def is_chain(self) -> bool:
        """Whether the part is one run of tokens (an ordinary causal continuation)."""
        return bool(np.array_equal(self.sees, np.tril(np.ones(self.sees.shape, dtype=bool))))


class PromptTreeBuilder:
    """Adds prompts to a tree one at a time, then plans the passes that score them.

    ``added_tokens`` tells what adding a prompt would cost.
    """

    def __init__(self) -> None:
        self._tokens: list[int] = []
        self._positions: list[int] = []
        self._parents: list[int] = []
        #: (parent index or -1, token) -> index of that token in the tree.
        self._children: dict[tuple[int, int], int] = {}
        #: Where each prompt's last token is.
        self._ends: list[int] = []

    def __len__(self) -> int:
        """Tokens in the tree so far."""
        return len(self._tokens)

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
        parent = path[-1] if path else -1
        for position in range(len(path), len(prompt)):
            token = int(prompt[position])
            node = len(self._tokens)
            self._tokens.append(token)
            self._positions.append(position)
            self._parents.append(parent)
            self._children[(parent, token)] = node
            parent = node
        self._ends.append(parent)

    def passes(self, most_tokens: int) -> list[ScoringPass]:
        """The forward passes that score every prompt, in order, each over at most
        ``most_tokens`` tokens of the tree besides a run on the path (a prompt longer than that
        with nothing to share is still one pass).

        Attending over a part costs its tokens times all the tokens it sees, masked or not, so
        a large tree is walked: a subtree of at most ``most_tokens`` tokens is one pass (with
        siblings, while they fit) on top of the cached path above it; a larger one has its
        first run of tokens (up to where it branches) evaluated into the cache, then its
        branches are visited the same way.
        """
        size = len(self._tokens)
        children: list[list[int]] = [[] for _ in range(size)]
        roots: list[int] = []
        for node, parent in enumerate(self._parents):
            (roots if parent < 0 else children[parent]).append(node)
        weight = [1] * size
        for node in reversed(range(size)):
            if self._parents[node] >= 0:
                weight[self._parents[node]] += weight[node]
        ending: dict[int, list[int]] = {}
        for number, node in enumerate(self._ends):
            ending.setdefault(node, []).append(number)
        planned: list[ScoringPass] = []

        def part(nodes: list[int], keep: int) -> ScoringPass:
            """A pass over ``nodes`` (whole subtrees or a run, each node after its parent)."""
            row_of = {node: row for row, node in enumerate(nodes)}
            sees = np.zeros((len(nodes), len(nodes)), dtype=bool)
            for row, node in enumerate(nodes):
                parent_row = row_of.get(self._parents[node])
                if parent_row is not None:
                    sees[row] = sees[parent_row]
                sees[row, row] = True
            ends = [(number, row_of[node]) for node in nodes for number in ending.get(node, [])]
            return ScoringPass(
                keep=keep,
                tokens=[self._tokens[node] for node in nodes],
                positions=[self._positions[node] for node in nodes],
                sees=sees,
                ends=ends,
            )

        def subtree(root: int) -> list[int]:
            nodes, stack = [], [root]
            while stack:
                node = stack.pop()
                nodes.append(node)
                stack.extend(children[node])
            return sorted(nodes)  # index order: every node after its parent

        def visit(siblings: list[int], keep: int) -> None:
            group: list[int] = []
            for node in siblings:
                if weight[node] <= most_tokens:
                    if group and len(group) + weight[node] > most_tokens:
                        planned.append(part(group, keep))
                        group = []
                    group = sorted(group + subtree(node))
                    continue
                run = [node]
                while len(children[run[-1]]) == 1 and weight[children[run[-1]][0]] > most_tokens:
                    run.append(children[run[-1]][0])
                planned.append(part(run, keep))
                visit(children[run[-1]], keep + len(run))
            if group:
                planned.append(part(group, keep))

        visit(roots, 0)
        return planned


def shared_prefix_groups(
    prompts: Sequence[Sequence[int]], max_suffix: int
) -> list[tuple[int, list[int]]]:
    """The prompts as (prefix length, prompt numbers) groups: every prompt of a group starts
    with the same ``prefix length`` tokens, and none has more than ``max_suffix`` (nor fewer
    than one) after them.

    A depth-two tree for engines that evaluate one shared prefix and then all suffixes on top
    of it (llama.cpp's sequences sharing KV cells): the groundedness judge's readings of one
    context chunk share the instructions and the chunk and differ in a short claim and
    question. The prompts are taken in sorted order, so prompts sharing a beginning are
    neighbours, and a prompt joins the group before it while the group's common prefix
    leaves every member's suffix within ``max_suffix``.
    """
    groups: list[tuple[int, list[int]]] = []
    for number in sorted(range(len(prompts)), key=lambda n: list(prompts[n])):
        prompt = prompts[number]
        if groups:
            length, members = groups[-1]
            common = min(length, _common_length(prompts[members[0]], prompt), len(prompt) - 1)
            longest = max(len(prompts[m]) for m in [*members, number])
            if longest - common <= max_suffix:
                groups[-1] = (common, [*members, number])
                continue
        groups.append((len(prompt) - 1, [number]))
    return groups


def suffix_batches(
    suffixes: list[list[int]], max_sequences: int, max_tokens: int
) -> list[list[list[int]]]:
    """The suffixes in order, cut into evaluations of at most ``max_sequences`` suffixes and
    ``max_tokens`` tokens (a suffix longer than that is an evaluation of its own)."""
    batches: list[list[list[int]]] = []
    used = 0
    for suffix in suffixes:
        if not batches or len(batches[-1]) == max_sequences or used + len(suffix) > max_tokens:
            batches.append([])
            used = 0
        batches[-1].append(suffix)
        used += len(suffix)
    return batches


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    return shared
