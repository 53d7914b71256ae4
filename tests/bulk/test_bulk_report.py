"""BulkRunner's groundedness reports: one row per claim with the check's columns, the frame's
index kept, resumable after an interruption and from a store on disk, on the offline judge
(a claim is supported when its document holds it verbatim) and on the small model."""

from __future__ import annotations

import pandas as pd
import pytest

from backend.bulk import BulkRunner, ResultStore
from backend.groundedness.report_summary import ROW_COLUMNS
from backend.interface import BackendProxy
from backend.protocol.groundedness_report import GroundednessReport
from backend.testing import EchoChatEngine, offline_backend


class CountingReports(BackendProxy):
    """The offline judge; counts the reports asked for and interrupts the ``interrupt_at``-th."""

    def __init__(self, interrupt_at: int | None = None) -> None:
        super().__init__(offline_backend(EchoChatEngine()))
        self.asked: list[str] = []
        self.interrupt_at = interrupt_at

    def groundedness_report(self, request):
        self.asked.append(request["response"])
        if len(self.asked) == self.interrupt_at:
            self.interrupt_at = None
            raise KeyboardInterrupt
        return super().groundedness_report(request)


FRAME = pd.DataFrame(
    {
        "context": ["The sky is blue. Grass is green.", "Water is wet.", "Fire is hot."],
        "answer": ["The sky is blue. Grass is red.", "Water is wet.", "Fire is hot. Ice is hot."],
    },
    index=["a", "b", "c"],
)


def test_one_row_per_claim_with_the_checks_columns():
    claims = BulkRunner(CountingReports(), progress=False).check_groundedness_report(FRAME)
    assert list(claims.columns) == ["row", *ROW_COLUMNS]
    assert claims[["row", "claim", "claim_text", "verdict"]].values.tolist() == [
        ["a", 0, "The sky is blue.", "grounded"],
        ["a", 1, "Grass is red.", "notGrounded"],
        ["b", 0, "Water is wet.", "grounded"],
        ["c", 0, "Fire is hot.", "grounded"],
        ["c", 1, "Ice is hot.", "notGrounded"],
    ]
    assert claims.check_verdict.tolist() == ["notGrounded"] * 2 + ["grounded"] + ["notGrounded"] * 2
    assert claims.corrected_response.tolist()[:3] == ["The sky is blue."] * 2 + ["Water is wet."]
    for row in claims.itertuples():
        answer, context = FRAME.answer[row.row], FRAME.context[row.row]
        assert answer[row.start : row.end] == row.claim_text
        assert context[row.evidence_start : row.evidence_end] == row.evidence_text
        assert 0 <= row.support <= 1 and row.support == row.evidence_support
    # The check-level support is its weakest claim's.
    assert (
        claims.groupby("row").support.min().tolist()
        == claims.groupby("row").check_support.first().tolist()
    )


def test_reports_on_the_frames_index():
    reports = BulkRunner(CountingReports(), progress=False).groundedness_reports(FRAME)
    assert reports.name == "report" and list(reports.index) == ["a", "b", "c"]
    assert all(isinstance(report, GroundednessReport) for report in reports)
    assert [report.verdict for report in reports] == ["notGrounded", "grounded", "notGrounded"]


def test_an_interrupted_run_resumes_without_asking_again():
    service = CountingReports(interrupt_at=2)
    runner = BulkRunner(service, progress=False)
    with pytest.raises(KeyboardInterrupt):
        runner.check_groundedness_report(FRAME)
    assert len(runner.store) == 1
    service.asked.clear()
    claims = runner.check_groundedness_report(FRAME)
    assert service.asked == FRAME.answer.tolist()[1:]
    assert claims.row.tolist() == ["a", "a", "b", "c", "c"]


def test_a_store_on_disk_resumes_in_a_new_runner_and_a_repeated_pair_is_asked_once(tmp_path):
    frame = pd.concat([FRAME, FRAME.iloc[[1]].rename(index={"b": "d"})])
    first = CountingReports()
    before = BulkRunner(first, ResultStore(tmp_path / "r.sqlite"), progress=False)
    expected = before.check_groundedness_report(frame)
    assert first.asked == FRAME.answer.tolist()  # "d" repeats "b"
    before.store.close()
    second = CountingReports()
    after = BulkRunner(second, ResultStore(tmp_path / "r.sqlite"), progress=False)
    pd.testing.assert_frame_equal(after.check_groundedness_report(frame), expected)
    assert second.asked == []
    # The plain verdicts are kept apart from the reports in the same store.
    assert after.check_groundedness(frame).tolist() == [
        "notGrounded",
        "grounded",
        "notGrounded",
        "grounded",
    ]


def test_missing_cells_are_refused_before_any_request():
    service = CountingReports()
    frame = pd.DataFrame({"context": ["a", None], "answer": ["a", "b"]})
    with pytest.raises(ValueError, match="column 'context'"):
        BulkRunner(service, progress=False).check_groundedness_report(frame)
    assert service.asked == []


def test_the_small_models_reports_agree_with_its_verdicts(small_backend):
    frame = pd.DataFrame(
        {
            "context": ["The Eiffel Tower is 330 metres tall. It opened in 1889."] * 2,
            "answer": [
                "The Eiffel Tower is 330 metres tall.",
                "The Eiffel Tower is 330 metres tall. It was painted blue in 2020.",
            ],
        }
    )
    runner = BulkRunner(small_backend, progress=False)
    claims = runner.check_groundedness_report(frame)
    verdicts = runner.check_groundedness(frame)
    assert claims.groupby("row").check_verdict.first().tolist() == verdicts.tolist()
    assert claims.groupby("row").size().tolist() == [1, 2]
