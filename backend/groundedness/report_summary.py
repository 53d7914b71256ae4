"""A groundedness report read for people and tables: the claims the context does not support,
said in one line, and the claims as flat rows.

The adapters (LangChain's tool and evaluator, LlamaIndex's evaluator), the bulk runners and
the notebooks all ask these functions, so an evaluator's comment and a DataFrame's columns say
the same thing the same way.
"""

from __future__ import annotations

from typing import Any

from backend.protocol.groundedness_report import GroundednessReport, ReportClaim, ReportEvidence

#: The score of each verdict, for evaluators whose results are averaged over a dataset: the
#: mean is the share of grounded answers, a ``notSure`` counting half.
VERDICT_SCORES = {"grounded": 1.0, "notSure": 0.5, "notGrounded": 0.0}

#: The columns of ``claim_rows``, in order: the check's, then the claim's, then its best
#: evidence's.
CHECK_COLUMNS = ("check_verdict", "check_support", "corrected_response")
CLAIM_COLUMNS = ("claim", "claim_text", "start", "end", "verdict", "support", "decided_early")
EVIDENCE_COLUMNS = ("evidence_text", "evidence_start", "evidence_end", "evidence_support")
ROW_COLUMNS = CHECK_COLUMNS + CLAIM_COLUMNS + EVIDENCE_COLUMNS


def unsupported_claims(report: GroundednessReport) -> list[ReportClaim]:
    """The claims whose verdict is not ``grounded`` (``notSure`` ones too), in order: those
    ``corrected_response`` leaves out."""
    return [claim for claim in report.claims if claim.verdict != "grounded"]


def best_evidence(claim: ReportClaim) -> ReportEvidence | None:
    """The chunk that gave the claim its support: the best read one (the likeliest chunk
    where none was read); None for a claim without chunks."""
    read = [evidence for evidence in claim.evidence if evidence.support is not None]
    if not read:
        return claim.evidence[0] if claim.evidence else None
    return max(read, key=lambda evidence: evidence.support or 0.0)  # the first of equals


def unsupported_summary(report: GroundednessReport) -> str:
    """One line naming what the context does not support, for an evaluator's feedback::

        notGrounded: 1 of 2 claims not supported by the context: "It is blue." (notGrounded,
        support 0.02)

    or, where every claim is supported, ``grounded: all 2 claims supported by the context
    (weakest support 0.97)``."""
    total = len(report.claims)
    plural = "claim" if total == 1 else "claims"
    missing = unsupported_claims(report)
    if not missing:
        return (
            f"{report.verdict}: all {total} {plural} supported by the context "
            f"(weakest support {report.support:.2f})"
        )
    named = "; ".join(
        f'"{claim.text}" ({claim.verdict}, support {claim.support:.2f})' for claim in missing
    )
    return (
        f"{report.verdict}: {len(missing)} of {total} {plural} not supported by the context: "
        f"{named}"
    )


def claim_rows(report: GroundednessReport) -> list[dict[str, Any]]:
    """One row per claim (``ROW_COLUMNS``): the check's verdict, support and corrected
    response, the claim's place (``claim`` counts from 0), verdict and support, and its best
    evidence (``best_evidence``: text and offsets in the context, null where it has none)."""
    rows = []
    for number, claim in enumerate(report.claims):
        evidence = best_evidence(claim)
        rows.append(
            {
                "check_verdict": report.verdict,
                "check_support": report.support,
                "corrected_response": report.corrected_response,
                "claim": number,
                "claim_text": claim.text,
                "start": claim.start,
                "end": claim.end,
                "verdict": claim.verdict,
                "support": claim.support,
                "decided_early": claim.decided_early,
                "evidence_text": evidence.text if evidence else None,
                "evidence_start": evidence.start if evidence else None,
                "evidence_end": evidence.end if evidence else None,
                "evidence_support": evidence.support if evidence else None,
            }
        )
    return rows
