"""Thresholds that turn the judge's support into a verdict, calibrated per model and reader.

Each (profile, reader) pair was calibrated on benchmarks/eval/groundedness.jsonl with
``python -m benchmarks.eval.calibrate`` (benchmarks/eval/calibration-<profile>-<reader>.json;
the figures are in benchmarks/README.md). The readers differ: llama.cpp reads the 4-bit GGUF
weights, transformers the bf16 (or float32) ones, and their P(yes) shift a little, so each has
its own thresholds. A calibration also says whether the contrast question is asked: its
thresholds hold only for the readings they were fitted on.

* ``grounded`` when support >= ``grounded_at``;
* ``notGrounded`` when support < ``not_grounded_below``;
* ``notSure`` in between: the model is torn, so we say so instead of guessing. A band is kept
  only where it marks the evaluation set's ambiguous pairs; elsewhere the two thresholds are
  one cut and the verdict is never notSure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend.protocol.schemas import Verdict


def verdict_for(support: float, grounded_at: float, not_grounded_below: float) -> Verdict:
    """The verdict for a support score under these thresholds (also what the calibration
    in benchmarks/eval replays on stored scores)."""
    if support >= grounded_at:
        return "grounded"
    if support < not_grounded_below:
        return "notGrounded"
    return "notSure"


@dataclass(frozen=True)
class JudgeCalibration:
    """How the judge reads one model with one reader, and where its verdicts change."""

    grounded_at: float
    not_grounded_below: float
    #: Whether the judge also asks the contrast question (``judge.CONTRAST``).
    contrast: bool

    def __post_init__(self) -> None:
        if not 0.0 <= self.not_grounded_below <= self.grounded_at <= 1.0:
            raise ValueError(
                "need 0 <= not_grounded_below <= grounded_at <= 1, got "
                f"{self.not_grounded_below} and {self.grounded_at}"
            )

    def verdict(self, support: float) -> Verdict:
        return verdict_for(support, self.grounded_at, self.not_grounded_below)


#: Readers: ``llama.cpp`` (quantized prompt evaluation) or ``transformers``. The transformers
#: reader (AMX CPUs, GPUs) was calibrated before the contrast question existed and asks the
#: support question alone until it is recalibrated on such a machine; the contrast question
#: does not help the 0.5B model, so the small profile does not ask it.
CALIBRATIONS = {
    ("default", "transformers"): JudgeCalibration(0.7174, 0.6863, contrast=False),
    ("default", "llama.cpp"): JudgeCalibration(0.595, 0.595, contrast=True),
    ("small", "transformers"): JudgeCalibration(0.5165, 0.5165, contrast=False),
    ("small", "llama.cpp"): JudgeCalibration(0.5211, 0.5211, contrast=False),
}


def calibration_for(
    profile: str,
    reader: str,
    grounded_at: float | None = None,
    not_grounded_below: float | None = None,
) -> JudgeCalibration:
    """The calibration of ``profile``'s model read by ``reader``, with the thresholds given
    here (an operator's own) in place of the calibrated ones."""
    calibration = CALIBRATIONS[(profile, reader)]
    overrides = {"grounded_at": grounded_at, "not_grounded_below": not_grounded_below}
    return replace(calibration, **{k: v for k, v in overrides.items() if v is not None})
