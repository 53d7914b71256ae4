"""The groundedness judge: the chat model's support for a response, claim by claim
(MiniCheck's method).

1. The response is split into claims (its sentences, ``backend.groundedness.claims``).
2. A long context is split into chunks of about ``chunk_tokens`` tokens on paragraph and
   sentence boundaries; for each claim the ``chunks_per_claim`` chunks sharing the most
   (rare) terms with it are kept, so the cost grows with the number of claims, not with
   claims times context length.
3. For each (claim, chunk) the model is asked the calibration's questions
   (``backend.groundedness.prompts``: "is the claim supported by the document?", and with
   the contrast question also "does the document contradict the claim?"). Rather than
   sampling answers we read the probabilities of "yes" and "no" as the next token
   (``backend.chat.yes_no``; MODELS.md: reading label probabilities worked far better than
   free text), which samples nothing and gives a confidence. The chunk's support for the
   claim is the mean over the questions of the answer speaking for the claim (the support
   question's P(yes), the contrast question's P(no)).
4. A claim's support is its best chunk's; the response's support is its weakest claim's: one
   unsupported sentence makes the response not grounded.

The prompts put the chunk before the claim and the question, so all readings of a chunk share
its evaluation (``prompts``). Chunks are read in rounds, each claim's likeliest chunk first;
given the thresholds (``stop_at``) the judge stops where the verdict can no longer change: a
claim supported at ``grounded_at`` needs no further chunk, and a claim below
``not_grounded_below`` with all its chunks read makes the response not grounded. The verdict
is then the one reading everything would give; the supports reported for claims left unread
are lower bounds.

With a learned reading (``backend.groundedness.learned``) a chunk's support is instead a
small classifier's, trained on public NLI data, over the model's final hidden state at the
answer position of the support question and that question's P(yes): the same prompt and the
same forward pass, read by trained weights rather than by the yes/no logits alone.

A fact-checker (``backend.engines.base.FactChecker``: MiniCheck, an NLI model) reads the
(chunk, claim) pairs instead, each as its authors feed it (``backend.engines.fact_checkers``),
in chunks of its own size and units; its support for a pair stands as the support question's
reading, and the rest (claims, ranking, rounds, stopping) is the same.

The judge gives the support; the verdict comes from thresholds calibrated for the model and
the engine that reads the prompts, with the same choice of questions
(``backend.groundedness.calibration``). What each choice scored is in benchmarks/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from backend.chat.yes_no import YesNoReader, YesNoReading
from backend.engines.base import ChatEngine, FactChecker
from backend.groundedness.claims import (
    chunk_pieces,
    claim_pieces,
    evidence_by_claim,
    rank_chunks,
)
from backend.groundedness.prompts import QUESTIONS, Question, judge_prompt

#: The judge's defaults: context chunks of about this many tokens, each claim read against
#: this many of them, responses of more sentences merged into this many claims.
CHUNK_TOKENS = 400
CHUNKS_PER_CLAIM = 2
MAX_CLAIMS = 8
#: Where a claim's evidence is looked for in a context longer than one chunk: ``chunks``, its
#: ``chunks_per_claim`` likeliest chunks; ``sentences``, one piece made of the context's
#: sentences likeliest to hold it (``claims.assemble_evidence``). The service reads ``chunks``:
#: ``sentences`` won on WiCE and lost on the project's long answers (benchmarks/README.md).
EVIDENCE = ("chunks", "sentences")


@dataclass(frozen=True)
class Assessment:
    """How well a context supports a response, by the judge's readings."""

    #: The weakest claim's support by its most supportive context chunk (see above).
    support: float
    prompt_tokens: int
    #: Each claim with its support, in response order.
    claims: tuple[tuple[str, float], ...] = ()
    #: Where each claim lies in the response: ``(start, end)`` in Python ``str`` indices
    #: (code points), end exclusive, in ``claims``' order (``claims.Piece``).
    claim_spans: tuple[tuple[int, int], ...] = ()
    #: Where each chunk the claims were read against lies in the context, likewise; empty
    #: with ``evidence="sentences"``, whose pieces are not ranges of the context.
    chunk_spans: tuple[tuple[int, int], ...] = ()
    #: For each claim, the chunks (indices into ``chunk_spans``) it was to be read against,
    #: likeliest first; those after the last one read were left unread once settled.
    candidates: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class ChunkReading:
    """What each question said of one (claim, chunk) pair: P(yes) by question name."""

    claim: int
    chunk: int
    p_yes: dict[str, float]
    #: The final hidden state at the support question's answer position, where read.
    hidden: np.ndarray | None = None
    #: The chunk's support for the claim, as the judge counted it (``GroundednessJudge``).
    support: float | None = None


class LearnedSupport(Protocol):
    """A trained reading of the support question: (P(yes), hidden state) -> support."""

    def support(self, p_yes: float, hidden: np.ndarray) -> float: ...


def chunk_support(p_yes: dict[str, float], questions: Sequence[Question]) -> float:
    """A chunk's support for a claim: the mean over the questions of the answer that speaks
    for the claim (P(yes) of the support question, P(no) of the contrast question)."""
    total = sum(p_yes[q.name] if q.yes_supports else 1.0 - p_yes[q.name] for q in questions)
    return total / len(questions)


class GroundednessJudge:
    """Reads the support of (context, response) pairs with a chat engine.

    Args:
        reader: the chat engine that reads the prompts, a ``YesNoReading`` (an engine
            behind an API), or a ``FactChecker`` that reads (chunk, claim) pairs itself (it
            asks the support question alone).
        questions: the names of the questions asked (``prompts.QUESTIONS``). Part of each
            calibration: thresholds hold only for the questions they were fitted on.
        stop_at: ``(grounded_at, not_grounded_below)``: stop reading where the verdict under
            these thresholds is settled; None reads every chunk of every claim (calibration).
        chunk_tokens: largest context chunk shown to the model at once (default
            ``CHUNK_TOKENS``, or a fact-checker's own ``chunk_tokens``).
        chunks_per_claim: how many chunks each claim is checked against.
        max_claims: more sentences than this are merged into this many claims.
        learned: a trained reading of the support question that gives each chunk's support
            (``backend.groundedness.learned``); it needs a local engine and the support
            question alone.
        hidden_states: keep each reading's hidden state in ``read``'s readings (what the
            learned reading is trained on); implied by ``learned``.
        evidence: ``chunks`` or ``sentences`` (``EVIDENCE``).
    """

    def __init__(
        self,
        reader: ChatEngine | YesNoReading | FactChecker,
        *,
        questions: Sequence[str],
        stop_at: tuple[float, float] | None = None,
        chunk_tokens: int | None = None,
        chunks_per_claim: int = CHUNKS_PER_CLAIM,
        max_claims: int = MAX_CLAIMS,
        learned: LearnedSupport | None = None,
        hidden_states: bool = False,
        evidence: str = "chunks",
    ) -> None:
        #: A fact-checker reads (chunk, claim) pairs itself; else prompts are read as yes/no.
        self._checker = reader if isinstance(reader, FactChecker) else None
        if chunk_tokens is None:
            chunk_tokens = self._checker.chunk_tokens if self._checker else CHUNK_TOKENS
        if chunk_tokens < 1 or chunks_per_claim < 1 or max_claims < 1:
            raise ValueError("chunk_tokens, chunks_per_claim and max_claims must be positive")
        unknown = [name for name in questions if name not in QUESTIONS]
        if unknown or not questions:
            raise ValueError(f"questions must be some of {sorted(QUESTIONS)}, got {questions}")
        if evidence not in EVIDENCE:
            raise ValueError(f"evidence must be one of {EVIDENCE}, got {evidence!r}")
        self._evidence = evidence
        self._chunk_tokens = chunk_tokens
        self._chunks_per_claim = chunks_per_claim
        self._max_claims = max_claims
        if self._checker is not None:
            self._reader: YesNoReading | FactChecker = self._checker
        else:
            self._reader = reader if isinstance(reader, YesNoReading) else YesNoReader(reader)
        self._questions = [QUESTIONS[name] for name in questions]
        self._stop_at = stop_at
        self._learned = learned
        self._hidden_states = hidden_states or learned is not None
        if self._hidden_states and not isinstance(self._reader, YesNoReader):
            raise ValueError("a learned reading needs a local chat engine's hidden states")
        if learned is not None and list(questions) != ["support"]:
            raise ValueError("a learned reading reads the support question alone")
        if self._checker is not None and list(questions) != ["support"]:
            raise ValueError("a fact-checker answers the support question alone")

    def assess(self, context: str, response: str) -> Assessment:
        """The response's support by the context, and the prompt tokens read for it."""
        assessment, _ = self.read(context, response)
        return assessment

    def read(self, context: str, response: str) -> tuple[Assessment, list[ChunkReading]]:
        """The assessment, and every reading behind it (what calibration keeps).

        Each round reads, for every claim not yet settled, its next likeliest chunk; all the
        prompts of a round are handed to the reader at once, so the engine evaluates each
        chunk once for all the claims and questions asked of it.
        """
        chunk_places = chunk_pieces(context, self._chunk_tokens, self._reader.count_tokens)
        claim_places = claim_pieces(response, self._max_claims)
        chunks = [piece.text for piece in chunk_places]
        claims = [piece.text for piece in claim_places]
        if self._evidence == "sentences" and len(chunks) > 1:
            count = self._reader.count_tokens
            chunks, ranked = evidence_by_claim(context, claims, self._chunk_tokens, count)
            chunk_places = []
        else:
            ranked = [rank_chunks(claim, chunks)[: self._chunks_per_claim] for claim in claims]
        best = [0.0] * len(claims)
        readings: list[ChunkReading] = []
        prompt_tokens = 0
        for round_ in range(self._chunks_per_claim):
            pairs = [
                (number, order[round_])
                for number, order in enumerate(ranked)
                if round_ < len(order) and not self._settled(best[number])
            ]
            if not pairs:
                break
            results = iter(self._read_round(chunks, claims, pairs))
            for number, chunk in pairs:
                p_yes, hidden = {}, None
                for question in self._questions:
                    p_yes[question.name], read, hidden = next(results)
                    prompt_tokens += read
                support = self._support(p_yes, hidden)
                readings.append(ChunkReading(number, chunk, p_yes, hidden, support))
                best[number] = max(best[number], support)
            if self._decided(best, ranked, round_):
                break
        supports = tuple(zip(claims, best, strict=True))
        assessment = Assessment(
            support=min(best),
            prompt_tokens=prompt_tokens,
            claims=supports,
            claim_spans=tuple((piece.start, piece.end) for piece in claim_places),
            chunk_spans=tuple((piece.start, piece.end) for piece in chunk_places),
            candidates=tuple(tuple(order) for order in ranked),
        )
        return assessment, readings

    def _read_round(
        self, chunks: list[str], claims: list[str], pairs: list[tuple[int, int]]
    ) -> list[tuple]:
        """(P(yes), prompt tokens, hidden state or None) of each (claim, chunk) pair's
        questions in turn, all read together: a fact-checker's support for the pair stands
        as the support question's answer."""
        if self._checker is not None:
            read_pairs = [(chunks[chunk], claims[number]) for number, chunk in pairs]
            return [(support, read, None) for support, read in self._checker.supports(read_pairs)]
        prompts = [
            judge_prompt(chunks[chunk], claims[number], question)
            for number, chunk in pairs
            for question in self._questions
        ]
        return self._read(prompts)

    def _read(self, prompts: list[list[dict[str, str]]]) -> list[tuple]:
        """(P(yes), prompt tokens, hidden state or None) of each prompt, read together."""
        if self._hidden_states:
            return self._reader.read_many_with_hidden(prompts)  # type: ignore[union-attr]
        return [(p, read, None) for p, read in self._reader.read_many(prompts)]

    def _support(self, p_yes: dict[str, float], hidden: np.ndarray | None) -> float:
        """A chunk's support for a claim: the learned reading's, else ``chunk_support``."""
        if self._learned is not None:
            return self._learned.support(p_yes["support"], hidden)  # type: ignore[arg-type]
        return chunk_support(p_yes, self._questions)

    def _settled(self, support: float) -> bool:
        """Whether a claim this well supported needs no further chunk: at ``grounded_at``
        it is grounded whatever another chunk says (a claim's support is its best chunk's)."""
        return self._stop_at is not None and support >= self._stop_at[0]

    def _decided(self, best: list[float], ranked: list[list[int]], round_: int) -> bool:
        """Whether a claim with every chunk read falls below ``not_grounded_below``: the
        response is then not grounded, whatever the other claims' next chunks say."""
        if self._stop_at is None:
            return False
        return any(
            support < self._stop_at[1] and len(order) <= round_ + 1
            for support, order in zip(best, ranked, strict=True)
        )
