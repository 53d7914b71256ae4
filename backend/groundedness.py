"""The groundedness check, judged by the chat model.

The model reads the context and the response as a claim and is asked whether, according to
the context alone, the claim is true, answering yes or no. Rather than sampling an answer we
read the probabilities of "yes" and "no" as the next token (MODELS.md: reading label
probabilities worked far better than free text), which makes the verdict deterministic and
gives a confidence, P(yes) renormalised over yes and no:

* ``grounded`` when P(yes) >= ``grounded_at``;
* ``notGrounded`` when P(yes) < ``not_grounded_below``;
* ``notSure`` in between: the model is torn, so we say so instead of guessing.

The defaults (0.45 / 0.40) were set on hand-made pairs with the small model, whose
probabilities are compressed around one half (supported pairs scored 0.50-0.56, unsupported
or contradicted ones 0.32-0.38); the larger model is more decisive and falls on the same
sides. A context longer than ``chunk_tokens`` is split into overlapping parts judged one by
one: the response is grounded when some part supports it, not grounded when every part says
it is not, else notSure. The request's temperature is validated but does not change the
verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from backend.engines.base import ChatEngine
from backend.schemas import Verdict

SYSTEM_PROMPT = "You are a careful fact checker."
QUESTION = (
    "Context:\n{context}\n\nClaim:\n{response}\n\n"
    "According to the context alone, is the claim true? Answer yes or no."
)
YES_SPELLINGS = ("yes", "Yes", " yes", " Yes", "YES")
NO_SPELLINGS = ("no", "No", " no", " No", "NO")


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    #: P(yes) of the most supportive context part.
    support: float
    prompt_tokens: int


def _first_token_ids(tokenizer: object, spellings: Sequence[str]) -> list[int]:
    encode = tokenizer.encode  # type: ignore[attr-defined]
    return sorted({encode(s, add_special_tokens=False)[0] for s in spellings})


class GroundednessJudge:
    """Judges (context, response) pairs with a chat engine."""

    def __init__(
        self,
        engine: ChatEngine,
        *,
        grounded_at: float = 0.45,
        not_grounded_below: float = 0.40,
        chunk_tokens: int = 3000,
    ) -> None:
        if not 0.0 <= not_grounded_below <= grounded_at <= 1.0:
            raise ValueError("need 0 <= not_grounded_below <= grounded_at <= 1")
        self._engine = engine
        self._grounded_at = grounded_at
        self._not_grounded_below = not_grounded_below
        self._chunk_tokens = chunk_tokens
        self._overlap = chunk_tokens // 10
        self._yes = _first_token_ids(engine.tokenizer, YES_SPELLINGS)
        self._no = [
            t for t in _first_token_ids(engine.tokenizer, NO_SPELLINGS) if t not in self._yes
        ]

    def _prompt_ids(self, context: str, response: str) -> list[int]:
        conversation = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": QUESTION.format(context=context, response=response)},
        ]
        tokenizer = self._engine.tokenizer
        text = tokenizer.apply_chat_template(  # type: ignore[attr-defined]
            conversation, add_generation_prompt=True, tokenize=False
        )
        return list(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    def _support(self, prompt_ids: Sequence[int]) -> float:
        logprobs = self._engine.next_token_logprobs(prompt_ids, self._yes + self._no)
        yes = sum(math.exp(lp) for lp in logprobs[: len(self._yes)])
        no = sum(math.exp(lp) for lp in logprobs[len(self._yes) :])
        return yes / (yes + no) if yes + no > 0 else 0.5

    def _verdict(self, support: float) -> Verdict:
        if support >= self._grounded_at:
            return "grounded"
        if support < self._not_grounded_below:
            return "notGrounded"
        return "notSure"

    def _context_parts(self, context: str) -> list[str]:
        tokenizer = self._engine.tokenizer
        ids = tokenizer.encode(context, add_special_tokens=False)  # type: ignore[attr-defined]
        if len(ids) <= self._chunk_tokens:
            return [context]
        step = self._chunk_tokens - self._overlap
        return [
            tokenizer.decode(ids[start : start + self._chunk_tokens])  # type: ignore[attr-defined]
            for start in range(0, len(ids) - self._overlap, step)
        ]

    def judge(self, context: str, response: str) -> Judgement:
        prompt_tokens = 0
        supports: list[float] = []
        for part in self._context_parts(context):
            ids = self._prompt_ids(part, response)
            prompt_tokens += len(ids)
            supports.append(self._support(ids))
        verdicts = {self._verdict(s) for s in supports}
        if "grounded" in verdicts:
            verdict: Verdict = "grounded"
        elif verdicts == {"notGrounded"}:
            verdict = "notGrounded"
        else:
            verdict = "notSure"
        return Judgement(verdict=verdict, support=max(supports), prompt_tokens=prompt_tokens)
