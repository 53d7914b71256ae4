"""The report check's assertions and span counts, offline: a report that keeps its promises
passes, and each broken promise is caught."""

from __future__ import annotations

import pytest

from backend.testing import EchoChatEngine, offline_backend
from benchmarks.judge.report_check import check_report, compare, span_differences

CONTEXT = "The tower is 330 m tall. It opened in 1889."
RESPONSE = "The tower is 330 m tall. It is blue."


@pytest.fixture(scope="module")
def service():
    backend = offline_backend(EchoChatEngine())
    yield backend
    backend.close()


def test_a_report_keeps_its_promises_and_broken_ones_are_caught(service):
    report = service.check_groundedness_report(CONTEXT, RESPONSE)
    check_report(CONTEXT, RESPONSE, report, "notGrounded")
    with pytest.raises(AssertionError, match="plain check"):
        check_report(CONTEXT, RESPONSE, report, "grounded")
    shifted = report.model_copy(
        update={"claims": [report.claims[0].model_copy(update={"start": 1})]}
    )
    with pytest.raises(AssertionError, match="claim offsets"):
        check_report(CONTEXT, RESPONSE, shifted, "notGrounded")
    kept_all = report.model_copy(update={"corrected_response": RESPONSE})
    with pytest.raises(AssertionError, match="kept unsupported"):
        check_report(CONTEXT, RESPONSE, kept_all, "notGrounded")


def test_compare_counts_both_answers(service):
    cases = [
        {"context": CONTEXT, "response": RESPONSE, "label": "notGrounded", "clear": True},
        {"context": CONTEXT, "response": "It opened in 1889.", "label": "grounded", "clear": True},
    ]
    figures = compare(service, cases)
    assert figures["checks"] == 2 and figures["claims"] == 3
    assert figures["balanced accuracy"] == 1.0
    assert figures["reports of the same prompt tokens"] == 2


def test_span_differences_count_what_the_judge_reads_otherwise():
    """One paragraph over the chunk budget is chunked by sentences, which the judge reads
    with a blank line where the context has a space; paragraphs read as written."""
    sentences = " ".join(f"Sentence number {i} here." for i in range(200))  # 800 words
    paragraphs = "\n\n".join(f"Paragraph number {i} here." for i in range(200))
    response = "席数は24席である。うどんもある！"
    words = lambda text: len(text.split())  # noqa: E731
    one = span_differences([{"context": sentences, "response": response}], words)
    assert one["claims read otherwise"] == 0 and one["checks of several chunks"] == 1
    assert one["chunks read otherwise"] == one["chunks"] == 2
    other = span_differences([{"context": paragraphs, "response": response}], words)
    assert other["chunks"] == 2 and other["chunks read otherwise"] == 0


def test_the_term_overlap_judge_reads_the_share_of_the_claims_terms():
    """The offline judge of ``report_check --reader overlap``: a claim half found in the
    context reads 0.5, so thresholds around it give each verdict."""
    from backend.backends.local import InProcessBackend
    from backend.testing import CharCountEmbeddingEngine, TermOverlapJudgeEngine

    context = "The tower is tall."
    with InProcessBackend(
        chat_engine_instance=TermOverlapJudgeEngine(),
        embedding_engine_instance=CharCountEmbeddingEngine(),
        grounded_at=0.8,
        not_grounded_below=0.4,
    ) as backend:
        full = backend.check_groundedness_report(context, "The tower is tall.")
        half = backend.check_groundedness_report(context, "The tower was red.")
        none = backend.check_groundedness_report(context, "Boats float well.")
    assert [r.support for r in (full, half, none)] == pytest.approx([1.0, 0.5, 0.0], abs=1e-4)
    assert [r.verdict for r in (full, half, none)] == ["grounded", "notSure", "notGrounded"]
