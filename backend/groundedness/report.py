"""The groundedness report: what the judge found, claim by claim, beside the verdict.

The plain check answers one word; the judge behind it has split the response into claims,
read each against the context chunks likeliest to hold its evidence, and kept every
reading. The report keeps them instead of throwing them away (Vertex AI's check-grounding and
Azure's groundedness detection give the same kind of answer): each claim where it lies in the
response, its support and verdict, the chunks it was read against where they lie in the
context, and the response with what the context does not support taken out.

It is built from the judge's ``read`` (``build_report``): no reading is added, so a report
costs what the plain check costs, and its verdict is the plain check's (the calibration's
verdict of the weakest claim's support).

Offsets are Python ``str`` indices: Unicode code points, ``end`` exclusive, so
``response[claim.start:claim.end] == claim.text`` for Korean and Japanese too (JavaScript's
UTF-16 indices differ from these outside the Basic Multilingual Plane, byte offsets differ
for every non-ASCII character).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from backend.groundedness.calibration import JudgeCalibration
from backend.groundedness.judge import Assessment, ChunkReading
from backend.protocol.groundedness_report import GroundednessReport, ReportClaim, ReportEvidence
from backend.protocol.schemas import Usage, Verdict


@dataclass(frozen=True)
class Evidence:
    """A context chunk a claim was to be read against."""

    #: ``context[start:end]``: the chunk as written in the context. (The judge reads a chunk
    #: made of several paragraphs or sentences with a blank line between them.)
    text: str
    start: int
    end: int
    #: The chunk's support for the claim in [0, 1]; None where the judge did not read it
    #: because the verdict was settled without it (``ClaimReport.decided_early``).
    support: float | None


@dataclass(frozen=True)
class ClaimReport:
    """One claim of the response (a sentence, or neighbouring sentences merged)."""

    #: ``response[start:end]``: the claim as written in the response.
    text: str
    start: int
    end: int
    #: The calibration's verdict of ``support``, with the response's thresholds.
    verdict: Verdict
    #: Its best chunk's support in [0, 1]: a lower bound where ``decided_early``.
    support: float
    #: The chunks it was to be read against, likeliest first.
    evidence: tuple[Evidence, ...]
    #: Whether some of its chunks were left unread: either it was supported at
    #: ``grounded_at`` by a chunk read first (another chunk could only raise its support, so
    #: its verdict is final), or another claim had already made the response not grounded
    #: (its support is then what the chunks read gave, and reading on might have raised it).
    decided_early: bool


@dataclass(frozen=True)
class JudgeReport:
    """A check's verdict, its support and the claims behind them."""

    #: The plain check's verdict: the calibration's verdict of ``support``.
    verdict: Verdict
    #: The weakest claim's support in [0, 1]: the judge's reading of how surely the context
    #: states that claim (one unsupported claim makes the response not grounded). Compared
    #: with ``grounded_at`` and ``not_grounded_below``, not a calibrated probability.
    support: float
    #: ``grounded`` at or above this support.
    grounded_at: float
    #: ``notGrounded`` below this support; ``notSure`` in between.
    not_grounded_below: float
    claims: tuple[ClaimReport, ...]
    #: The response without the claims whose verdict is not ``grounded`` (notSure ones go
    #: too: what is left is what the context supports), the rest in its original text.
    corrected_response: str
    #: The prompt tokens the judge read (the plain check's usage).
    prompt_tokens: int


def build_report(
    context: str,
    response: str,
    assessment: Assessment,
    readings: Sequence[ChunkReading],
    calibration: JudgeCalibration,
) -> JudgeReport:
    """The report of one check from the judge's ``read`` of it (``readings`` need each
    chunk's ``support``) and the calibration that decides its verdicts.

    Raises:
        ValueError: the assessment has no chunk ranges (the ``sentences`` evidence, whose
            pieces are not ranges of the context).
    """
    if not assessment.chunk_spans:
        raise ValueError("a report needs the chunks' ranges: read with evidence='chunks'")
    read = {(r.claim, r.chunk): r.support for r in readings}
    claims = []
    for number, ((_, support), (start, end), order) in enumerate(
        zip(assessment.claims, assessment.claim_spans, assessment.candidates, strict=True)
    ):
        evidence = tuple(
            Evidence(
                context[assessment.chunk_spans[chunk][0] : assessment.chunk_spans[chunk][1]],
                *assessment.chunk_spans[chunk],
                read.get((number, chunk)),
            )
            for chunk in order
        )
        claims.append(
            ClaimReport(
                text=response[start:end],
                start=start,
                end=end,
                verdict=calibration.verdict(support),
                support=support,
                evidence=evidence,
                decided_early=any(e.support is None for e in evidence),
            )
        )
    return JudgeReport(
        verdict=calibration.verdict(assessment.support),
        support=assessment.support,
        grounded_at=calibration.grounded_at,
        not_grounded_below=calibration.not_grounded_below,
        claims=tuple(claims),
        corrected_response=without_spans(
            response, [(c.start, c.end) for c in claims if c.verdict != "grounded"]
        ),
        prompt_tokens=assessment.prompt_tokens,
    )


def report_body(report: JudgeReport, model: str) -> GroundednessReport:
    """The report as the API answers it (``backend.protocol.groundedness_report``), for the
    versioned ``model`` name."""
    return GroundednessReport(
        model=model,
        verdict=report.verdict,
        support=report.support,
        grounded_at=report.grounded_at,
        not_grounded_below=report.not_grounded_below,
        claims=[
            ReportClaim(
                text=claim.text,
                start=claim.start,
                end=claim.end,
                verdict=claim.verdict,
                support=claim.support,
                evidence=[ReportEvidence(**vars(e)) for e in claim.evidence],
                decided_early=claim.decided_early,
            )
            for claim in report.claims
        ],
        corrected_response=report.corrected_response,
        usage=Usage(
            prompt_tokens=report.prompt_tokens,
            completion_tokens=0,
            total_tokens=report.prompt_tokens,
        ),
    )


def without_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with the ranges ``spans`` (in order, not overlapping) taken out, each with the
    white space after it, or before it where nothing follows, so that the sentences left keep
    their own spacing: "A. B. C." without B is "A. C."."""
    kept: list[str] = []
    position = 0
    for start, end in spans:
        after = end + (len(text[end:]) - len(text[end:].lstrip()))
        if after == len(text):  # nothing follows: take the white space before instead
            start = len(text[position:start].rstrip()) + position
        kept.append(text[position:start])
        position = after
    kept.append(text[position:])
    return "".join(kept)
