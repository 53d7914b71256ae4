"""Groundedness reports built by hand, for tests of what reads them (summaries, evaluators)
without running a judge."""

from __future__ import annotations

from backend.protocol.groundedness_report import GroundednessReport


def hand_made_report(
    claims: list[dict], verdict: str, support: float, corrected_response: str
) -> GroundednessReport:
    """A report as the API answers it: model ``m``, the usual thresholds (grounded at 0.6,
    not grounded below 0.4) and a token count nothing here reads."""
    return GroundednessReport(
        model="m",
        verdict=verdict,
        support=support,
        grounded_at=0.6,
        not_grounded_below=0.4,
        claims=claims,
        corrected_response=corrected_response,
        usage={"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
    )
