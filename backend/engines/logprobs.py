"""Per-token log-probabilities, computed by the engines only when a request asks for them.

With ``SamplingParams.top_logprobs`` set, an engine yields ``ScoredToken`` ids: ints like any
token id (the KV cache, end-of-turn checks and detokenizing read them unchanged), carrying the
chosen token's log-probability and the most likely alternatives. The numbers are those of the
model's distribution after the grammar mask of constrained output and before temperature and
top-p, as OpenAI and vLLM report raw model log-probabilities: a greedy choice is always the
top entry, and tokens the grammar forbids are never listed. Without ``top_logprobs`` nothing
here runs: the decode loops stay as fast as before.
"""

from __future__ import annotations

import torch


class ScoredToken(int):
    """A generated token id with its log-probability and the ``top`` alternatives'.

    Attributes:
        logprob: the token's log-probability.
        top: (token id, log-probability) pairs, most likely first; a token tied with the
            chosen one comes after it, so a greedy choice is the first entry.
    """

    logprob: float
    top: tuple[tuple[int, float], ...]

    def __new__(cls, token_id: int, logprob: float, top: tuple[tuple[int, float], ...]):
        token = super().__new__(cls, token_id)
        token.logprob = logprob
        token.top = top
        return token

    def __repr__(self) -> str:
        return f"ScoredToken({int(self)}, logprob={self.logprob:.4f}, top={len(self.top)})"


def scored_token(logprobs: torch.Tensor, token: int, top_n: int) -> ScoredToken:
    """``token`` with its log-probability and the ``top_n`` most likely tokens of
    ``logprobs`` (a 1-D log-softmax; forbidden tokens at -inf are left out)."""
    top: list[tuple[int, float]] = []
    if top_n > 0:
        values, ids = torch.topk(logprobs, min(top_n, logprobs.shape[-1]))
        top = [
            (int(i), float(v))
            for v, i in zip(values.tolist(), ids.tolist(), strict=True)
            if v != float("-inf")
        ]
        # topk orders ties arbitrarily; the chosen token goes first among its equals.
        top.sort(key=lambda entry: (-entry[1], entry[0] != token))
    return ScoredToken(token, float(logprobs[token]), tuple(top))
