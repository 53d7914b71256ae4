"""The groundedness judge: the chat model's support for a response, claim by claim
(MiniCheck's method).

1. The response is split into claims (its sentences, ``backend.groundedness.claims``).
2. A long context is split into chunks of about ``chunk_tokens`` tokens on paragraph and
   sentence boundaries; for each claim the ``chunks_per_claim`` chunks sharing the most
   (rare) terms with it are kept, so the cost grows with the number of claims, not with
   claims times context length.
3. For each (claim, chunk) the model is asked "is the claim supported by the document?", and
   with ``contrast`` also "does the document contradict the claim?", each plainly and after
   four worked examples. Rather than sampling answers we read the probabilities of "yes" and
   "no" as the next token (``backend.chat.yes_no``; MODELS.md: reading label probabilities
   worked far better than free text), which samples nothing and gives a confidence. The
   chunk's support for the claim is the mean of the support question's P(yes) and the
   contrast question's P(no) over the readings.
4. A claim's support is its best chunk's; the response's support is its weakest claim's: one
   unsupported sentence makes the response not grounded.

The judge gives the support; the verdict comes from thresholds calibrated for the model and
the engine that reads the prompts, with the same choice of questions
(``backend.groundedness.calibration``). What each choice scored is in benchmarks/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.chat.yes_no import YesNoReader, YesNoReading
from backend.engines.base import ChatEngine
from backend.groundedness.claims import chunk_context, rank_chunks, split_claims


@dataclass(frozen=True)
class Question:
    """One way of asking the model about a (document, claim) pair."""

    instruction: str
    #: With ``{document}`` and ``{claim}``.
    template: str
    #: The answers to ``EXAMPLES``, in order, shown in the worked-example reading.
    example_answers: tuple[str, str, str, str]
    #: Whether "yes" speaks for the claim (P(yes) is its support) or against it (P(no) is).
    yes_supports: bool


SUPPORT = Question(
    instruction=(
        "You are a careful fact checker. Decide whether the claim is supported by the "
        "document. Answer yes only if everything the claim says is stated in the document or "
        "follows from it; answer no if the document contradicts any part of the claim or does "
        "not mention it. Answer yes or no."
    ),
    template="Document:\n{document}\n\nClaim: {claim}\n\nIs the claim supported by the document?",
    example_answers=("yes", "no", "no", "yes"),
    yes_supports=True,
)
#: The contrast question. Alone it is no judge: the 1.5B model answers "yes" mostly when the
#: claim agrees. But that leaning to "yes" is shared with the support question for the same
#: (document, claim), so averaging in its P(no) cancels part of it (contextual calibration).
CONTRAST = Question(
    instruction=(
        "You are a careful fact checker. Decide whether the document contradicts the claim. "
        "Answer yes if the document states something that conflicts with any part of the "
        "claim, such as a different number, date, name or place, or the opposite of what the "
        "claim says; answer no if the document agrees with the claim or does not mention it. "
        "Answer yes or no."
    ),
    template="Document:\n{document}\n\nClaim: {claim}\n\nDoes the document contradict the claim?",
    example_answers=("no", "yes", "no", "no"),
    yes_supports=False,
)
#: Worked examples (document, claim) shown before the pair in the second reading of each
#: question: a paraphrase and an inference that are supported, a contradicted number, and an
#: unsupported addition.
EXAMPLES = (
    (
        "The museum opens at 10:00 and closes at 18:00 every day except Monday.",
        "The museum is closed on Mondays.",
    ),
    (
        "The museum opens at 10:00 and closes at 18:00 every day except Monday.",
        "The museum closes at 20:00.",
    ),
    (
        "Mina moved to Busan in 2019 to work as a nurse.",
        "Mina moved to Busan in 2019 and bought a house there.",
    ),
    (
        "The bridge, finished in 1932, is 503 metres long.",
        "The bridge is over five hundred metres long.",
    ),
)


def asked(question: Question, document: str, claim: str) -> dict[str, str]:
    """The user turn that asks ``question`` about the pair."""
    return {"role": "user", "content": question.template.format(document=document, claim=claim)}


def reading_leads(question: Question) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The messages before the pair in the question's two readings: its instruction alone,
    and its instruction with the worked examples and their answers."""
    instruction = {"role": "system", "content": question.instruction}
    examples = []
    for (document, claim), answer in zip(EXAMPLES, question.example_answers, strict=True):
        examples += [asked(question, document, claim), {"role": "assistant", "content": answer}]
    return [instruction], [instruction, *examples]


@dataclass(frozen=True)
class Assessment:
    """How well a context supports a response, by the judge's readings."""

    #: The weakest claim's support by its most supportive context chunk (see above).
    support: float
    prompt_tokens: int
    #: Each claim with its support, in response order.
    claims: tuple[tuple[str, float], ...] = ()


class GroundednessJudge:
    """Reads the support of (context, response) pairs with a chat engine.

    Args:
        reader: the chat engine that reads the prompts, or a ``YesNoReading`` (an engine
            behind an API).
        contrast: also ask the contrast question (``CONTRAST``). Part of each calibration:
            thresholds hold only for the questions they were fitted on.
        chunk_tokens: largest context chunk shown to the model at once.
        chunks_per_claim: how many chunks each claim is checked against.
        max_claims: more sentences than this are merged into this many claims.
    """

    def __init__(
        self,
        reader: ChatEngine | YesNoReading,
        *,
        contrast: bool,
        chunk_tokens: int = 400,
        chunks_per_claim: int = 2,
        max_claims: int = 8,
    ) -> None:
        if chunk_tokens < 1 or chunks_per_claim < 1 or max_claims < 1:
            raise ValueError("chunk_tokens, chunks_per_claim and max_claims must be positive")
        self._chunk_tokens = chunk_tokens
        self._chunks_per_claim = chunks_per_claim
        self._max_claims = max_claims
        self._reader = reader if isinstance(reader, YesNoReading) else YesNoReader(reader)
        questions = (SUPPORT, CONTRAST) if contrast else (SUPPORT,)
        #: What comes before the pair in each reading of each question.
        self._leads = [(question, reading_leads(question)) for question in questions]

    def _readings(self, document: str, claim: str) -> list[tuple[list[dict[str, str]], bool]]:
        """The prompts of one (chunk, claim) pair, each with whether its "yes" speaks for
        the claim: every question asked alone and after the worked examples. The claim comes
        last, so readings of other claims against the same chunk share the prompt's
        beginning (a chunk's text is evaluated once per question, where the engine reuses
        cached prefixes)."""
        return [
            ([*lead, asked(question, document, claim)], question.yes_supports)
            for question, leads in self._leads
            for lead in leads
        ]

    def assess(self, context: str, response: str) -> Assessment:
        """The response's support by the context, and the prompt tokens read for it.

        Every reading of every (claim, chunk) pair is handed to the reader at once, so an
        engine that scores prompts together (the transformers engine) evaluates the shared
        instructions and chunks once; others read them one after the other, in this order.
        """
        chunks = chunk_context(context, self._chunk_tokens, self._reader.count_tokens)
        claims = split_claims(response, self._max_claims)
        pairs = [
            (number, chunks[index])
            for number, claim in enumerate(claims)
            for index in rank_chunks(claim, chunks)[: self._chunks_per_claim]
        ]
        readings = [self._readings(chunk, claims[number]) for number, chunk in pairs]
        conversations = [conversation for pair in readings for conversation, _ in pair]
        results = iter(self._reader.read_many(conversations))
        best = [0.0] * len(claims)
        prompt_tokens = 0
        for (number, _), pair in zip(pairs, readings, strict=True):
            total = 0.0
            for _, yes_supports in pair:
                p_yes, read = next(results)
                total += p_yes if yes_supports else 1.0 - p_yes
                prompt_tokens += read
            # The chunk's support is the mean over its readings; the claim's, its best chunk's.
            best[number] = max(best[number], total / len(pair))
        supports = list(zip(claims, best, strict=True))
        return Assessment(
            support=min(s for _, s in supports),
            prompt_tokens=prompt_tokens,
            claims=tuple(supports),
        )
