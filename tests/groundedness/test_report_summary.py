"""``report_summary``: the unsupported claims named in one line, the verdict's score, the best
evidence of a claim and the claims as flat rows, on reports built by hand."""

from __future__ import annotations

from backend.groundedness.report_summary import (
    ROW_COLUMNS,
    VERDICT_SCORES,
    best_evidence,
    claim_rows,
    unsupported_claims,
    unsupported_summary,
)
from backend.protocol.groundedness_report import GroundednessReport, ReportClaim
from tests.hand_made_reports import hand_made_report

RESPONSE = "The tower is tall. It is old. It is blue."
CONTEXT = "The tower is tall.\n\nIt is old."


def _claim(text: str, verdict: str, support: float, evidence: list[dict]) -> dict:
    start = RESPONSE.index(text)
    return {
        "text": text,
        "start": start,
        "end": start + len(text),
        "verdict": verdict,
        "support": support,
        "evidence": evidence,
        "decided_early": False,
    }


def _evidence(text: str, support: float | None) -> dict:
    start = CONTEXT.index(text)
    return {"text": text, "start": start, "end": start + len(text), "support": support}


def _report(claims: list[dict], verdict: str, support: float) -> GroundednessReport:
    return hand_made_report(claims, verdict, support, corrected_response="The tower is tall.")


TALL = _claim(
    "The tower is tall.",
    "grounded",
    0.9,
    [_evidence("It is old.", 0.1), _evidence("The tower is tall.", 0.9)],
)
OLD = _claim("It is old.", "notSure", 0.5, [_evidence("It is old.", None)])
BLUE = _claim("It is blue.", "notGrounded", 0.02, [])
MIXED = _report([TALL, OLD, BLUE], "notGrounded", 0.02)


def test_unsupported_claims_are_those_not_grounded_notsure_too():
    assert [claim.text for claim in unsupported_claims(MIXED)] == ["It is old.", "It is blue."]
    assert unsupported_summary(MIXED) == (
        'notGrounded: 2 of 3 claims not supported by the context: "It is old." (notSure, '
        'support 0.50); "It is blue." (notGrounded, support 0.02)'
    )


def test_a_grounded_report_says_so_in_the_singular_too():
    assert unsupported_summary(_report([TALL], "grounded", 0.9)) == (
        "grounded: all 1 claim supported by the context (weakest support 0.90)"
    )
    assert VERDICT_SCORES == {"grounded": 1.0, "notSure": 0.5, "notGrounded": 0.0}


def test_best_evidence_is_the_best_read_chunk_else_the_likeliest():
    tall, old, blue = (ReportClaim.model_validate(claim) for claim in (TALL, OLD, BLUE))
    assert best_evidence(tall).text == "The tower is tall."  # read second, supports most
    assert best_evidence(old).text == "It is old."  # none read: the likeliest
    assert best_evidence(blue) is None


def test_claim_rows_hold_the_check_the_claim_and_its_best_evidence():
    rows = claim_rows(MIXED)
    assert [tuple(row) for row in rows] == [ROW_COLUMNS] * 3
    assert rows[0] == {
        "check_verdict": "notGrounded",
        "check_support": 0.02,
        "corrected_response": "The tower is tall.",
        "claim": 0,
        "claim_text": "The tower is tall.",
        "start": 0,
        "end": 18,
        "verdict": "grounded",
        "support": 0.9,
        "decided_early": False,
        "evidence_text": "The tower is tall.",
        "evidence_start": 0,
        "evidence_end": 18,
        "evidence_support": 0.9,
    }
    assert rows[1]["evidence_support"] is None and rows[1]["evidence_start"] == 20
    assert [rows[2][name] for name in ("claim", "evidence_text", "evidence_start")] == [
        2,
        None,
        None,
    ]
