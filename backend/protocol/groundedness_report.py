"""The body and answer of ``POST /v1/core/groundedness/report``, and the completion that
carries a report when a spec check asks for one (``core_report``).

Not in the spec, whose check answers one word. The shape follows Vertex AI's check-grounding
(a support score, each claim with its position in the answer and the context it was checked
against) and Azure's groundedness detection (the answer with what the context does not
support taken out). Lives beside ``tokenize`` rather than in ``schemas`` because its default
model is the catalogue's, and the catalogue is built on ``schemas``.

Offsets are Python ``str`` indices: Unicode code points, ``end`` exclusive, so that
``response[start:end]`` (Python) is the claim's text; in JavaScript, whose strings count
UTF-16 units, use ``Array.from(response).slice(start, end).join("")``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from backend.protocol.catalogue import GROUNDEDNESS_MODEL
from backend.protocol.schemas import ChatCompletion, Usage, Verdict
from backend.protocol.schemas.base import RequestModel, ResponseModel

#: What joins a list of context texts into one context (``groundedness.request`` joins them
#: the same way for a spec check).
CONTEXT_SEPARATOR = "\n\n"

OFFSET_UNIT = "code_point"
_OFFSETS = "Unicode code points (Python str indices), end exclusive"


class GroundednessReportRequest(RequestModel):
    """Body of ``POST /v1/core/groundedness/report``."""

    model: str = Field(
        default=GROUNDEDNESS_MODEL, description="The groundedness model (or its alias)."
    )
    context: str | list[str] = Field(
        description="The context: a text, or texts (retrieved documents) joined by a blank "
        "line ('\\n\\n') into one, in which evidence offsets count.",
    )
    response: str = Field(min_length=1, description="The response to check.")

    @field_validator("context")
    @classmethod
    def _some_context(cls, value: str | list[str]) -> str | list[str]:
        if not (value if isinstance(value, str) else CONTEXT_SEPARATOR.join(value)):
            raise ValueError("context must not be empty")
        return value

    @property
    def context_text(self) -> str:
        """The context as one text: a list's texts joined by a blank line."""
        if isinstance(self.context, str):
            return self.context
        return CONTEXT_SEPARATOR.join(self.context)


class ReportEvidence(ResponseModel):
    """A context chunk a claim was checked against."""

    text: str = Field(description="context[start:end]: the chunk as written in the context.")
    start: int = Field(ge=0, description=f"Where the chunk starts in the context ({_OFFSETS}).")
    end: int = Field(ge=0, description=f"Where the chunk ends in the context ({_OFFSETS}).")
    support: float | None = Field(
        ge=0,
        le=1,
        description="The chunk's support for the claim in [0, 1]; null where the judge did not "
        "read it, the verdict being settled without it.",
    )


class ReportClaim(ResponseModel):
    """A claim of the response: a sentence, or neighbouring sentences merged."""

    text: str = Field(description="response[start:end]: the claim as written in the response.")
    start: int = Field(ge=0, description=f"Where the claim starts in the response ({_OFFSETS}).")
    end: int = Field(ge=0, description=f"Where the claim ends in the response ({_OFFSETS}).")
    verdict: Verdict = Field(description="The claim's support under the response's thresholds.")
    support: float = Field(
        ge=0,
        le=1,
        description="Its best chunk's support in [0, 1]; a lower bound where decided_early.",
    )
    evidence: list[ReportEvidence] = Field(
        description="The chunks it was to be checked against, likeliest first."
    )
    decided_early: bool = Field(
        description="Some of its chunks were left unread: it was already supported at "
        "grounded_at (its verdict is final), or another claim had already made the response "
        "notGrounded (its support is what the chunks read gave)."
    )


class GroundednessReport(ResponseModel):
    """A groundedness check's verdict, with the claims behind it."""

    object: Literal["groundedness.report"] = "groundedness.report"
    model: str = Field(description="The versioned model name actually used.")
    verdict: Verdict = Field(
        description="The check's verdict: the same as a chat request to the model answers."
    )
    support: float = Field(
        ge=0,
        le=1,
        description="The weakest claim's support in [0, 1]: the judge's reading of how surely "
        "the context states it (one unsupported claim makes the response not grounded). It "
        "is compared with grounded_at and not_grounded_below; it is not a calibrated "
        "probability.",
    )
    grounded_at: float = Field(description="grounded at or above this support.")
    not_grounded_below: float = Field(
        description="notGrounded below this support; notSure in between."
    )
    offset_unit: Literal["code_point"] = Field(
        default=OFFSET_UNIT, description=f"The unit of every start and end: {_OFFSETS}."
    )
    claims: list[ReportClaim] = Field(description="The response's claims, in order.")
    corrected_response: str = Field(
        description="The response without its claims whose verdict is not grounded (notSure "
        "ones too), the rest as written: what the context supports. Nothing is rewritten."
    )
    usage: Usage = Field(description="The prompt tokens the judge read; no completion tokens.")


class ChatCompletionWithReport(ChatCompletion):
    """A groundedness check's completion, as the spec answers it, with the report beside it:
    what a check request with ``core_report: true`` answers."""

    core_report: GroundednessReport = Field(
        description="The check's report (POST /v1/core/groundedness/report's answer)."
    )
