"""Whether a chain of tool calls needs another call: a learned reading of the model's own state
after tool results.

After a result the model decides between another call and an answer. Its share of a call's
opening (``backend.chat.call_after_results``) says whether it would open a call, which it does
at almost every state, done or not: where the chain is done the call repeats the last one and is
dropped, and where the chain's next tool sits elsewhere in the list the call written is often a
repeat too, so the answer comes too soon (a balance in dollars given for a question in yen). The
model's final hidden state at the answer's first position says more. It is read as the
generation evaluates the prompt (``ChatEngine.reading_before_generation``), so the answer or
call that follows from that prompt reuses the reading's evaluation. A logistic regression
over that vector and the logit of the share, trained on the states of our development tasks'
solution chains in several tool orders (``benchmarks/agents/state_reading.py``), gives the
probability that another call is needed.

It rules where the two readings disagree: where it finds a call needed the answer opens one (a
repeat is still dropped, and the model then calls once more, held to the tools the last step did
not call, ``backend.chat.next_in_chain``), and where it finds the chain done the model answers
from the results without tools, as it does after a dropped repeat, without writing the call
first. The parameters live beside this module in ``chain_states/<profile>-llama.cpp.npz`` with a
``.json`` record of their data, folds and figures; ``make train-chain-state`` rebuilds them.
They are the judge's kind of reading (``backend.groundedness.learned.LearnedReading``: the share
in the place of the judge's P(yes), the threshold in ``grounded_at``). A model without trained
parameters, or an engine that cannot expose hidden states, keeps the share alone.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backend.chat.call_after_results import call_opening_tokens
from backend.engines.base import ChatEngine
from backend.groundedness.learned import LearnedReading

CHAIN_STATES = Path(__file__).resolve().parent / "chain_states"


def parameters_path(profile: str) -> Path:
    """Where the trained chain-state reading of ``profile``'s model lives."""
    return CHAIN_STATES / f"{profile}-llama.cpp.npz"


@functools.cache
def chain_state_reading_for(profile: str) -> LearnedReading | None:
    """The trained chain-state reading of ``profile``'s model, if one was trained."""
    path = parameters_path(profile)
    return LearnedReading.load(path) if path.exists() else None


@dataclass(frozen=True)
class ChainState:
    """What the model's state after tool results says: the share of a call's opening and
    the learned probability that another call is needed."""

    share: float
    needs_call: float
    threshold: float

    @property
    def call_needed(self) -> bool:
        return self.needs_call >= self.threshold


def read_chain_state(
    engine: ChatEngine, answer_ids: Sequence[int], reading: LearnedReading
) -> ChainState:
    """The chain's state at the answer's first position of ``answer_ids`` (the agent prompt,
    tools offered)."""
    opening = sorted(call_opening_tokens(engine.tokenizer))
    logprobs, hidden = engine.reading_before_generation(answer_ids, opening)
    share = float(np.exp(logprobs).sum())
    return ChainState(share, reading.support(share, hidden), reading.grounded_at)
