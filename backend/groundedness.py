"""The groundedness check, judged by the chat model.

The model reads the context and the response and is asked for one label: ``supported``,
``contradicted`` or ``unsupported``. Rather than sampling an answer we read the
probabilities of the three labels as the next token (MODELS.md: this worked far better than
free text), which makes the verdict deterministic and gives a confidence:

* ``grounded`` when P(supported) >= ``confidence``;
* ``notGrounded`` when P(contradicted) + P(unsupported) >= ``confidence``;
* ``notSure`` otherwise: the model is torn, so we say so instead of guessing.

The probabilities are renormalised over the three labels. A context longer than
``chunk_tokens`` is split into overlapping parts judged one by one: the response is
grounded when some part supports it, not grounded when every part says so, else notSure.
The request's temperature is validated but does not change the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from backend.engines.base import ChatEngine
from backend.schemas import Verdict

SYSTEM_PROMPT = (
    "You are a careful fact checker. You decide whether a response is supported by a "
    "context. Use only the context, not your own knowledge."
)
QUESTION = (
    "Context:\n{context}\n\nResponse:\n{response}\n\n"
    "Is every statement of the response supported by the context? Reply with one word: "
    "supported (the context states it), contradicted (the context says otherwise), or "
    "unsupported (the context does not say)."
)
LABELS = ("supported", "contradicted", "unsupported")


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    #: Renormalised probabilities of supported / contradicted / unsupported (best part).
    probabilities: tuple[float, float, float]
    prompt_tokens: int


def _label_token_ids(tokenizer: object) -> list[list[int]]:
    """First token of each label, in the spellings a model is likely to start with."""
    ids: list[list[int]] = []
    for label in LABELS:
        variants = {label, label.capitalize(), " " + label, " " + label.capitalize()}
        firsts = {tokenizer.encode(v, add_special_tokens=False)[0] for v in variants}  # type: ignore[attr-defined]
        ids.append(sorted(firsts))
    taken = [set(group) for group in ids]
    for i, group in enumerate(taken):  # a token shared by two labels would blur them
        others = set().union(*(g for j, g in enumerate(taken) if j != i))
        ids[i] = sorted(group - others)
    return ids


class GroundednessJudge:
    """Judges (context, response) pairs with a chat engine."""

    def __init__(self, engine: ChatEngine, *, confidence: float = 0.6, chunk_tokens: int = 3000):
        self._engine = engine
        self._confidence = confidence
        self._chunk_tokens = chunk_tokens
        self._overlap = chunk_tokens // 10
        self._label_ids = _label_token_ids(engine.tokenizer)

    def _prompt_ids(self, context: str, response: str) -> list[int]:
        conversation = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": QUESTION.format(context=context, response=response)},
        ]
        text = self._engine.tokenizer.apply_chat_template(  # type: ignore[attr-defined]
            conversation, add_generation_prompt=True, tokenize=False
        )
        return list(self._engine.tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    def _label_probabilities(self, prompt_ids: Sequence[int]) -> tuple[float, float, float]:
        flat = [t for group in self._label_ids for t in group]
        logprobs = self._engine.next_token_logprobs(prompt_ids, flat)
        masses, pos = [], 0
        for group in self._label_ids:
            masses.append(sum(math.exp(lp) for lp in logprobs[pos : pos + len(group)]))
            pos += len(group)
        total = sum(masses) or 1.0
        sup, con, uns = (m / total for m in masses)
        return sup, con, uns

    def _verdict(self, probabilities: tuple[float, float, float]) -> Verdict:
        sup, con, uns = probabilities
        if sup >= self._confidence:
            return "grounded"
        if con + uns >= self._confidence:
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
        results: list[tuple[Verdict, tuple[float, float, float]]] = []
        for part in self._context_parts(context):
            ids = self._prompt_ids(part, response)
            prompt_tokens += len(ids)
            probabilities = self._label_probabilities(ids)
            results.append((self._verdict(probabilities), probabilities))
        verdicts = {verdict for verdict, _ in results}
        if "grounded" in verdicts:
            verdict: Verdict = "grounded"
        elif verdicts == {"notGrounded"}:
            verdict = "notGrounded"
        else:
            verdict = "notSure"
        best = max(results, key=lambda r: r[1][0])[1]
        return Judgement(verdict=verdict, probabilities=best, prompt_tokens=prompt_tokens)
