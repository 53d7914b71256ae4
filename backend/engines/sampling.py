"""Choosing a token from logits by temperature and top-p (the engines' own decode loops).

Under a JSON constraint, a sampled answer's structure is chosen greedily and only its values
are drawn: whether a reply holds another tool call, whether an object gets another member.
Drawn at temperature 0.7, the 0.5B model's agent-loop reply held two or three calls of the
one call it most likely makes, and a JSON-mode answer an extra member, a few times in a
hundred (benchmarks/README.md); its most likely structure is what a caller relies on.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from backend.engines.logprobs import scored_token

if TYPE_CHECKING:
    from backend.engines.base import SamplingParams
    from backend.engines.token_mask import TokenMask


def choose_token(
    logits: torch.Tensor,
    params: SamplingParams,
    mask: TokenMask | None = None,
    generator: torch.Generator | None = None,
) -> int:
    """The next token: masked first when the output is constrained, then greedy or sampled.

    ``logits`` (1-D float32) is masked in place. With ``params.top_logprobs`` set, the token
    is a ``ScoredToken`` scored on the masked logits, before temperature and top-p.
    """
    if mask is not None:
        mask.apply(logits)
    if params.greedy:
        token = int(torch.argmax(logits))
    elif mask is not None:
        token = _sample_values(logits, params, mask, generator)
    else:
        token = sample_token(logits, params.temperature, params.top_p, generator)
    if mask is not None:
        mask.accept(token)
    if params.top_logprobs is not None:
        return scored_token(torch.log_softmax(logits, dim=-1), token, params.top_logprobs)
    return token


#: Draws that may fall on structure before a constrained answer's value token is taken
#: greedily (each such draw is taken out of the next one's choices).
_VALUE_DRAWS = 8


def _sample_values(
    logits: torch.Tensor,
    params: SamplingParams,
    mask: TokenMask,
    generator: torch.Generator | None,
) -> int:
    """A token of a constrained answer: the most likely one where it lays out structure
    (``TokenMask.writes_structure``), else one drawn among the tokens that write values."""
    best = int(torch.argmax(logits))
    if mask.writes_structure(best):
        return best
    candidates = logits.clone()
    for _ in range(_VALUE_DRAWS):
        token = sample_token(candidates, params.temperature, params.top_p, generator)
        if not mask.writes_structure(token):
            return token
        candidates[token] = float("-inf")
    return best


class TokenChooser:
    """Chooses the tokens of one generation, one call per step: the first
    ``params.greedy_opening`` greedily, the rest as ``params`` asks (``choose_token``).

    A greedy opening makes the decision the first tokens carry (whether an answer is a tool
    call, ``backend.chat.generation``) the model's most likely one rather than a draw.
    """

    def __init__(
        self,
        params: SamplingParams,
        mask: TokenMask | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        self._params = params
        self._opening = dataclasses.replace(params, temperature=0.0)
        self._opening_left = params.greedy_opening
        self._mask = mask
        self._generator = generator

    def __call__(self, logits: torch.Tensor) -> int:
        params = self._params
        if self._opening_left > 0:
            self._opening_left -= 1
            params = self._opening
        return choose_token(logits, params, self._mask, self._generator)


def sample_token(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> int:
    """One token from softmax(logits / temperature), restricted to the top-p nucleus."""
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        # Keep each token whose preceding mass is below top_p: the smallest set reaching top_p.
        keep = (torch.cumsum(sorted_probs, dim=-1) - sorted_probs) < top_p
        sorted_probs = sorted_probs * keep
        choice = torch.multinomial(sorted_probs, 1, generator=generator)
        return int(order[choice])
    return int(torch.multinomial(probs, 1, generator=generator))
