"""The groundedness check, judged by the chat model claim by claim (MiniCheck's method).

1. The response is split into claims (its sentences, ``backend.claims.split_claims``).
2. A long context is split into chunks of about ``chunk_tokens`` tokens on paragraph and
   sentence boundaries; for each claim the ``chunks_per_claim`` chunks sharing the most
   (rare) terms with it are kept, so the cost grows with the number of claims, not with
   claims times context length.
3. For each (claim, chunk) the model is asked whether the document supports the claim,
   answering yes or no. Rather than sampling an answer we read the probabilities of "yes" and
   "no" as the next token (MODELS.md: reading label probabilities worked far better than free
   text), which samples nothing and gives a confidence, P(yes) renormalised
   over yes and no. Each pair is read twice, by the question alone and after four worked
   examples, and the two P(yes) are averaged: on the evaluation set with the 1.5B model the
   pair scored a balanced accuracy of 0.92 (0.915 cross-validated), against 0.91 and 0.90
   for either reading alone and 0.86 for the earlier prompt with the question after the
   claim (``benchmarks/eval``).
4. A claim's support is its best chunk's; the response's support is its weakest claim's: one
   unsupported sentence makes the response not grounded.

* ``grounded`` when support >= ``grounded_at``;
* ``notGrounded`` when support < ``not_grounded_below``;
* ``notSure`` in between: the model is torn, so we say so instead of guessing.

The thresholds are calibrated per profile and per reader of the prompts on
``benchmarks/eval/groundedness.jsonl`` (see ``backend.config``). The request's temperature is
validated but does not change the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.claims import chunk_context, rank_chunks, split_claims
from backend.engines.base import ChatEngine
from backend.schemas import Verdict
from backend.yes_no import YesNoReader

INSTRUCTION = (
    "You are a careful fact checker. Decide whether the claim is supported by the document. "
    "Answer yes only if everything the claim says is stated in the document or follows from "
    "it; answer no if the document contradicts any part of the claim or does not mention it. "
    "Answer yes or no."
)
QUESTION = "Document:\n{document}\n\nClaim: {claim}\n\nIs the claim supported by the document?"
#: Worked examples shown before the pair in the second reading of each claim: a paraphrase
#: and an inference that are supported, a contradicted number, and an unsupported addition.
EXAMPLES = (
    (
        "The museum opens at 10:00 and closes at 18:00 every day except Monday.",
        "The museum is closed on Mondays.",
        "yes",
    ),
    (
        "The museum opens at 10:00 and closes at 18:00 every day except Monday.",
        "The museum closes at 20:00.",
        "no",
    ),
    (
        "Mina moved to Busan in 2019 to work as a nurse.",
        "Mina moved to Busan in 2019 and bought a house there.",
        "no",
    ),
    (
        "The bridge, finished in 1932, is 503 metres long.",
        "The bridge is over five hundred metres long.",
        "yes",
    ),
)


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    #: The weakest claim's support: P(yes) of its most supportive context chunk.
    support: float
    prompt_tokens: int
    #: Each claim with its support, in response order.
    claims: tuple[tuple[str, float], ...] = ()


def verdict_for(support: float, grounded_at: float, not_grounded_below: float) -> Verdict:
    """The verdict for a support score under these thresholds (also what the calibration
    in benchmarks/eval replays on stored scores)."""
    if support >= grounded_at:
        return "grounded"
    if support < not_grounded_below:
        return "notGrounded"
    return "notSure"


class GroundednessJudge:
    """Judges (context, response) pairs with a chat engine.

    Args:
        engine: the chat model that reads the prompts.
        grounded_at / not_grounded_below: the verdict thresholds on the support.
        chunk_tokens: largest context chunk shown to the model at once.
        chunks_per_claim: how many chunks each claim is checked against.
        max_claims: more sentences than this are merged into this many claims.
    """

    def __init__(
        self,
        engine: ChatEngine,
        *,
        grounded_at: float = 0.45,
        not_grounded_below: float = 0.40,
        chunk_tokens: int = 400,
        chunks_per_claim: int = 2,
        max_claims: int = 8,
    ) -> None:
        if not 0.0 <= not_grounded_below <= grounded_at <= 1.0:
            raise ValueError("need 0 <= not_grounded_below <= grounded_at <= 1")
        if chunk_tokens < 1 or chunks_per_claim < 1 or max_claims < 1:
            raise ValueError("chunk_tokens, chunks_per_claim and max_claims must be positive")
        self._grounded_at = grounded_at
        self._not_grounded_below = not_grounded_below
        self._chunk_tokens = chunk_tokens
        self._chunks_per_claim = chunks_per_claim
        self._max_claims = max_claims
        self._reader = YesNoReader(engine)

    def _count_tokens(self, text: str) -> int:
        tokenizer = self._reader.engine.tokenizer
        return len(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    def _prompts(self, document: str, claim: str) -> list[list[int]]:
        """The two readings of one (chunk, claim) pair: the question alone, and after the
        worked examples. The claim comes last, so readings of other claims against the same
        chunk share the prompt's beginning (a chunk's text is evaluated once, where the
        engine reuses cached prefixes)."""
        question = {"role": "user", "content": QUESTION.format(document=document, claim=claim)}
        instruction = {"role": "system", "content": INSTRUCTION}
        examples = []
        for example_document, example_claim, answer in EXAMPLES:
            text = QUESTION.format(document=example_document, claim=example_claim)
            examples += [
                {"role": "user", "content": text},
                {"role": "assistant", "content": answer},
            ]
        return [
            self._reader.prompt_ids([instruction, question]),
            self._reader.prompt_ids([instruction, *examples, question]),
        ]

    def _verdict(self, support: float) -> Verdict:
        return verdict_for(support, self._grounded_at, self._not_grounded_below)

    def judge(self, context: str, response: str) -> Judgement:
        chunks = chunk_context(context, self._chunk_tokens, self._count_tokens)
        prompt_tokens = 0
        claims: list[tuple[str, float]] = []
        for claim in split_claims(response, self._max_claims):
            best = 0.0
            for index in rank_chunks(claim, chunks)[: self._chunks_per_claim]:
                readings = self._prompts(chunks[index], claim)
                prompt_tokens += sum(len(ids) for ids in readings)
                best = max(best, sum(map(self._reader.probability, readings)) / len(readings))
            claims.append((claim, best))
        support = min(s for _, s in claims)
        return Judgement(
            verdict=self._verdict(support),
            support=support,
            prompt_tokens=prompt_tokens,
            claims=tuple(claims),
        )
