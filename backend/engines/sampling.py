"""Choosing a token from logits by temperature and top-p (the engines' own decode loops).

Under a JSON constraint, a sampled answer's structure is chosen greedily and only its values
are drawn: whether a reply holds another tool call, whether an object gets another member,
what that member is named. Where a value's string ends is part of the value, and drawn.
Drawn at temperature 0.7, the 0.5B model's agent-loop reply held two or three calls of the
one call it most likely makes, and a JSON-mode answer an extra member, a few times in a
hundred (benchmarks/README.md); its most likely structure is what a caller relies on.

A constrained answer's drawn strings also keep out of loops: a token that would extend a run
of tokens the open string has already written is drawn less the longer that run (the DRY
penalty, ``repetition_penalties``, over ``TokenMask.string_tokens``). Sampled at 0.7, the
small model sometimes wrote a JSON string over and over ("He's a cat! He's a cat! ...") and
then members that were not asked for: 2 JSON-mode answers in 100, none with the penalty
(benchmarks/README.md, "Loops in sampled answers"). The penalty looks inside the open string
only: a later call's arguments, a list's items and an object's fields often must repeat
what came before (the same team, id or year in each of three parallel calls), and over the
whole answer it pushed them off what the request says. Free text is left as drawn: tables,
code and refrains repeat by design.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import torch

from backend.engines.logprobs import scored_token

if TYPE_CHECKING:
    from backend.engines.base import FavouredFirstToken, SamplingParams
    from backend.engines.token_mask import TokenMask


#: The DRY penalty (llama.cpp's ``dry_multiplier``, ``dry_base``, ``dry_allowed_length``, at
#: the values its authors suggest): a token that would make a run of ``n`` tokens already
#: written (``n >= REPEAT_ALLOWED``) happen again loses ``REPEAT_PENALTY * REPEAT_BASE **
#: (n - REPEAT_ALLOWED)`` from its logit; runs are looked for in the last ``REPEAT_WINDOW``
#: tokens of the answer (never in the prompt: copying from it is what answers do).
REPEAT_PENALTY = 0.8
REPEAT_BASE = 1.75
REPEAT_ALLOWED = 2
REPEAT_WINDOW = 512


def repetition_penalties(history: list[int]) -> dict[int, float]:
    """What each token that would repeat a run of the answer's tokens loses from its logit:
    for every earlier place where the answer's last tokens were written, the token that
    followed them there, by the length of the longest such run."""
    tokens = history[-REPEAT_WINDOW:]
    n = len(tokens)
    longest: dict[int, int] = {}
    for end in range(n - 1):
        if tokens[end] != tokens[-1]:
            continue
        length = 1
        while length <= end and tokens[end - length] == tokens[n - 1 - length]:
            length += 1
        following = tokens[end + 1]
        longest[following] = max(length, longest.get(following, 0))
    return {
        token: REPEAT_PENALTY * REPEAT_BASE ** min(length - REPEAT_ALLOWED, 30)
        for token, length in longest.items()
        if length >= REPEAT_ALLOWED
    }


def choose_token(
    logits: torch.Tensor,
    params: SamplingParams,
    mask: TokenMask | None = None,
    generator: torch.Generator | None = None,
) -> int:
    """The next token: masked first when the output is constrained, then greedy or sampled.

    ``logits`` (1-D float32) is masked in place. With ``params.top_logprobs`` set, the token
    is a ``ScoredToken`` scored on the masked logits, before temperature and top-p. A
    constrained answer's drawn strings are penalised for repeating themselves
    (``repetition_penalties`` over ``mask.string_tokens``).
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
    (``TokenMask.writes_structure``), else one drawn among the tokens that write values,
    penalised for repeating the open string so far.

    Inside a value's string, where it ends is part of the value, so it is drawn too: a draw
    that falls on a token closing the string (``"``, ``",`` or ``.",``, say) ends it with
    that token's text, and of the tokens that end it so, the most likely is taken, so that
    what follows the quote is structure chosen greedily.
    """
    best = int(torch.argmax(logits))
    if mask.writes_structure(best) and not mask.in_value_string:
        return best
    candidates = logits.clone()
    for token, penalty in repetition_penalties(mask.string_tokens).items():
        candidates[token] -= penalty
    for _ in range(_VALUE_DRAWS):
        token = sample_token(candidates, params.temperature, params.top_p, generator)
        endings = mask.string_endings(token)
        if endings is not None:
            return int(endings[int(torch.argmax(logits[endings]))])
        if not mask.writes_structure(token):
            return token
        candidates[token] = float("-inf")
    return best


class TokenChooser:
    """Chooses the tokens of one generation, one call per step: an opening greedily (at most
    ``params.greedy_opening`` tokens, until ``params.opening_decided`` says they carry their
    decision), its first token by ``params.first_token`` where it is set, the rest as
    ``params`` asks (``choose_token``).

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
        self._history: list[int] = []

    def _opening_goes_on(self) -> bool:
        decided = self._params.opening_decided
        if decided is not None and self._history and decided(self._history):
            self._opening_left = 0
            return False
        return True

    def __call__(self, logits: torch.Tensor, best: int | None = None) -> int:
        """The next token from ``logits``; ``best``, where the caller already has the row's
        argmax (a batch's, read in one copy), is taken as it is when the choice is plainly
        greedy (no mask, no log-probabilities), without another read of the logits."""
        params = self._params
        if not self._history and params.first_token is not None:
            token = favoured_first_token(logits, params, self._mask)
            self._history.append(int(token))
            self._opening_left -= 1
            return token
        if self._opening_left > 0 and self._opening_goes_on():
            self._opening_left -= 1
            params = self._opening
        if (
            best is not None
            and params.greedy
            and self._mask is None
            and params.top_logprobs is None
        ):
            self._history.append(best)
            return best
        token = choose_token(logits, params, self._mask, self._generator)
        self._history.append(int(token))
        return token


def favoured_first_token(
    logits: torch.Tensor, params: SamplingParams, mask: TokenMask | None = None
) -> int:
    """The first token by ``params.first_token`` (``FavouredFirstToken``): the likeliest of
    its tokens when they hold at least its share of the probability, else the likeliest
    other token (masked first where the output is constrained)."""
    rule: FavouredFirstToken = params.first_token  # type: ignore[assignment]
    if mask is not None:
        mask.apply(logits)
    favoured = torch.zeros(logits.shape[-1], dtype=torch.bool)
    favoured[[t for t in rule.tokens if t < logits.shape[-1]]] = True
    favoured = favoured.to(logits.device)
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    share = float(torch.exp(logprobs[favoured]).sum())
    candidates = logprobs.masked_fill(~favoured if share >= rule.share else favoured, -math.inf)
    token = int(torch.argmax(candidates))
    if mask is not None:
        mask.accept(token)
    if params.top_logprobs is not None:
        return scored_token(logprobs, token, params.top_logprobs)
    return token


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
