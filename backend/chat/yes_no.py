"""Reading a model's yes-or-no answer as a probability, without generating it.

Asked a yes/no question, a chat model's next-token distribution says how sure it is: P(yes)
renormalised over the first tokens of "yes" and "no" in their usual spellings. Reading it is
one prompt evaluation, samples nothing, and gives a confidence that thresholds can be
calibrated on (MODELS.md: reading label probabilities worked far better than free text with
the small models). The groundedness judge and the tool-call check use it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from backend.engines.base import ChatEngine

YES_SPELLINGS = ("yes", "Yes", " yes", " Yes", "YES")
NO_SPELLINGS = ("no", "No", " no", " No", "NO")


def _first_token_ids(tokenizer: object, spellings: Sequence[str]) -> list[int]:
    encode = tokenizer.encode  # type: ignore[attr-defined]
    return sorted({encode(s, add_special_tokens=False)[0] for s in spellings})


@runtime_checkable
class YesNoReading(Protocol):
    """What reads P(yes) of a model's answer to a conversation: a local engine
    (``YesNoReader``) or an engine behind an OpenAI-compatible API, from its ``top_logprobs``
    (``backend.backends.remote_engine.judge_reading``)."""

    def read(self, conversation: list[dict[str, str]]) -> tuple[float, int]:
        """P(yes) of the answer to ``conversation``, and the prompt tokens read for it."""
        ...

    def read_many(self, conversations: list[list[dict[str, str]]]) -> list[tuple[float, int]]:
        """``read`` of each conversation, in order (together, where the reader can)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone, as the model counts them (for sizing context chunks)."""
        ...


def yes_no_share(yes: float, no: float) -> float:
    """P(yes) renormalised over yes and no (0.5 when neither is likely at all)."""
    return yes / (yes + no) if yes + no > 0 else 0.5


class YesNoReader:
    """P(yes) of a chat engine's answer to the prompt it is given."""

    def __init__(self, engine: ChatEngine) -> None:
        self.engine = engine
        self._yes = _first_token_ids(engine.tokenizer, YES_SPELLINGS)
        self._no = [
            t for t in _first_token_ids(engine.tokenizer, NO_SPELLINGS) if t not in self._yes
        ]

    def prompt_ids(self, conversation: list[dict[str, str]]) -> list[int]:
        """The conversation through the chat template, ready for the assistant's answer."""
        tokenizer = self.engine.tokenizer
        text = tokenizer.apply_chat_template(  # type: ignore[attr-defined]
            conversation, add_generation_prompt=True, tokenize=False
        )
        return list(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    def probability(self, prompt_ids: Sequence[int]) -> float:
        """P(yes) over yes and no as the next token (0.5 when neither is likely at all)."""
        return self._share(self.engine.next_token_logprobs(prompt_ids, self._yes + self._no))

    def _share(self, logprobs: Sequence[float]) -> float:
        """P(yes) over yes and no from the candidates' log-probabilities."""
        yes = sum(math.exp(lp) for lp in logprobs[: len(self._yes)])
        no = sum(math.exp(lp) for lp in logprobs[len(self._yes) :])
        return yes_no_share(yes, no)

    def read(self, conversation: list[dict[str, str]]) -> tuple[float, int]:
        return self.read_many([conversation])[0]

    def read_many(self, conversations: list[list[dict[str, str]]]) -> list[tuple[float, int]]:
        """Each conversation's P(yes) and prompt tokens; the engine scores the prompts
        together (``ChatEngine.next_token_logprobs_many``)."""
        prompts = [self.prompt_ids(conversation) for conversation in conversations]
        scored = self.engine.next_token_logprobs_many(prompts, self._yes + self._no)
        return [(self._share(lps), len(ids)) for lps, ids in zip(scored, prompts, strict=True)]

    def read_many_with_hidden(
        self, conversations: list[list[dict[str, str]]]
    ) -> list[tuple[float, int, np.ndarray]]:
        """``read_many`` with the model's final hidden state at the answer position
        (``ChatEngine.next_token_readings_many``), what a learned reading reads."""
        prompts = [self.prompt_ids(conversation) for conversation in conversations]
        scored = self.engine.next_token_readings_many(prompts, self._yes + self._no)
        return [
            (self._share(lps), len(ids), hidden)
            for (lps, hidden), ids in zip(scored, prompts, strict=True)
        ]

    def count_tokens(self, text: str) -> int:
        tokenizer = self.engine.tokenizer
        return len(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]
