"""Whether the model calls again after tool results: decided at a threshold on how likely its
answer is to open a call, not by its likeliest first token.

Shown the results of a chain's second step, the 1.5B model answers too soon. Asked for Jun
Seo's balance in euros, it looks up the id, then the balance in dollars, then ends its turn
and answers in the wrong currency, though it gives a call's opening 0.32 of its probability,
and the call it writes when it does call is the conversion the task needs. Over the states of
our development tasks' solution chains (``benchmarks/agents``), as the generation reads them,
the model gives a call's opening at least 0.135 wherever another call is needed, and at most
0.093 where it has everything and the call it would write is no repeat
(``get_employee_name`` after the email it was asked for, ``calculate("(12 + 3) * 4")`` after
a conversion). Between that and the half where its likeliest token opens a call anyway, each
call it writes when it has everything repeats one already answered, which the review drops
before the answer is written without tools (``backend.chat.generation``), as it is when the
model ends its turn at once, which is what its likeliest token does there. So after
results a call is opened whenever the model gives it at least ``CALL_AFTER_RESULTS_FROM`` of
its probability: midway between the two, chosen on the development states only
(benchmarks/README.md has the readings and the held-out check).

Only after tool results: on a request's first step the tool-need check decides
(``backend.chat.tool_need``). Where a learned reading of the model's state was trained for
the profile's model, it overrules the share where they disagree
(``backend.chat.chain_state``). The 0.5B model's share was not measured, so its profile
keeps the likeliest first token.
"""

from __future__ import annotations

import weakref
from typing import Any

from backend.chat.logprobs import decoded_vocabulary
from backend.chat.tool_calls import TOOL_CALL_OPEN
from backend.engines.base import FavouredFirstToken

#: By profile: the share of its probability the model gives a call's opening, after tool
#: results, from which it calls (``FavouredFirstToken``); None: the likeliest first token
#: decides.
CALL_AFTER_RESULTS_FROM: dict[str, float | None] = {"default": 0.11, "small": None}

#: What the first token of a call begins with (after whitespace): bare JSON, an array of
#: calls, a fence or the tag (``backend.chat.tool_calls.opens_tool_call``).
CALL_OPENINGS = ("{", "[", "```", TOOL_CALL_OPEN)

_OPENING_TOKENS: weakref.WeakKeyDictionary[Any, frozenset[int]] = weakref.WeakKeyDictionary()


def call_opening_tokens(tokenizer: Any) -> frozenset[int]:
    """The tokens whose text, after whitespace, opens a call (``CALL_OPENINGS``); read once
    per tokenizer. A tokenizer that cannot list its vocabulary (the offline doubles' one
    token a character) gives the first token of each opening."""
    if tokenizer not in _OPENING_TOKENS:
        vocabulary = decoded_vocabulary(tokenizer)
        openings = tuple(text.encode() for text in CALL_OPENINGS)
        opening = (i for i, piece in enumerate(vocabulary) if piece.lstrip().startswith(openings))
        if not vocabulary:
            opening = (tokenizer.encode(text)[0] for text in CALL_OPENINGS)
        _OPENING_TOKENS[tokenizer] = frozenset(opening)
    return _OPENING_TOKENS[tokenizer]


def call_after_results(tokenizer: Any, share: float) -> FavouredFirstToken:
    """The first-token rule of an answer after tool results: a call whenever its opening has
    at least ``share`` of the model's probability."""
    return FavouredFirstToken(call_opening_tokens(tokenizer), share)
