"""Drafts looked up in what a generation has read and written (prompt-lookup decoding, vLLM's
n-gram speculation): where its last few tokens appeared before, the tokens that followed
them there are likely next. An answer from tool results restates the question's words and
the results' values, so the runner checks such a draft in one evaluation instead of decoding
it a token a call (``SamplingParams.draft_from_prompt``, ``llamacpp_drafts``).
"""

from __future__ import annotations

from collections.abc import Sequence

#: The longest and shortest run of last tokens looked up. A longer match is tried first (it
#: predicts better); a single token recurs too often to predict what follows it.
LONGEST_MATCH = 3
SHORTEST_MATCH = 2


def looked_up_draft(tokens: Sequence[int], size: int) -> list[int]:
    """Up to ``size`` tokens that followed the latest earlier occurrence of the last
    ``LONGEST_MATCH`` tokens of ``tokens`` (else of fewer, down to ``SHORTEST_MATCH``); empty
    where none occurred before."""
    count = len(tokens)
    for length in range(LONGEST_MATCH, SHORTEST_MATCH - 1, -1):
        if count <= length:
            continue
        tail = list(tokens[count - length :])
        # The latest occurrence first: the nearest text is most like what is being written.
        for start in range(count - length - 1, -1, -1):
            if tokens[start] == tail[0] and list(tokens[start : start + length]) == tail:
                return list(tokens[start + length : start + length + size])
    return []
