"""Thresholds that turn the judge's support into a verdict, calibrated per model and reader.

Each (profile, reader) pair was calibrated with ``python -m benchmarks.eval.calibrate`` on the
first groundedness set and the second set's train split, its questions and thresholds chosen
by cross-validation on folds fixed per context (benchmarks/eval/calibration-<profile>-<reader>
.json; the figures are in benchmarks/README.md); the second set's test split was never read to
choose them. The readers differ: llama.cpp reads the 4-bit GGUF weights, transformers the bf16
(or float32) ones, and their P(yes) shift a little, so each has its own thresholds. A
calibration also says which questions are asked (``backend.groundedness.prompts``): its
thresholds hold only for the readings they were fitted on, in the prompt layout they were
fitted with.

* ``grounded`` when support >= ``grounded_at``;
* ``notGrounded`` when support < ``not_grounded_below``;
* ``notSure`` in between: the model is torn, so we say so instead of guessing. A band is kept
  only where it marks the evaluation set's ambiguous pairs; elsewhere the two thresholds are
  one cut and the verdict is never notSure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend.groundedness.learned import LearnedReading, learned_reading_for
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
    #: The questions the judge asks (names in ``prompts.QUESTIONS``).
    questions: tuple[str, ...]
    #: The learned reading that gives the support (``learned.LearnedReading``), where the
    #: model and reader have one; None reads P(yes).
    learned: LearnedReading | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.not_grounded_below <= self.grounded_at <= 1.0:
            raise ValueError(
                "need 0 <= not_grounded_below <= grounded_at <= 1, got "
                f"{self.not_grounded_below} and {self.grounded_at}"
            )

    def verdict(self, support: float) -> Verdict:
        return verdict_for(support, self.grounded_at, self.not_grounded_below)

    @property
    def thresholds(self) -> tuple[float, float]:
        """``(grounded_at, not_grounded_below)``."""
        return self.grounded_at, self.not_grounded_below


#: The P(yes) calibrations, for readers without a learned reading. Readers: ``llama.cpp``
#: (quantized prompt evaluation) or ``transformers`` (bf16: GPUs, the copy that
#: ``CORE_GROUNDEDNESS_ENGINE=transformers`` loads).
CALIBRATIONS = {
    ("default", "transformers"): JudgeCalibration(0.4426, 0.4426, ("support",)),
    ("default", "llama.cpp"): JudgeCalibration(0.3713, 0.3713, ("support",)),
    ("small", "transformers"): JudgeCalibration(0.5058, 0.5048, ("support",)),
    ("small", "llama.cpp"): JudgeCalibration(0.5777, 0.5777, ("support", "contrast")),
}


def calibration_for(
    profile: str,
    reader: str,
    grounded_at: float | None = None,
    not_grounded_below: float | None = None,
    reads_hidden_states: bool = True,
) -> JudgeCalibration:
    """The calibration of ``profile``'s model read by ``reader``, with the thresholds given
    here (an operator's own) in place of the calibrated ones: its learned reading where one
    was trained and the reader exposes hidden states (``reads_hidden_states``), else P(yes)
    and ``CALIBRATIONS``."""
    learned = learned_reading_for(profile, reader) if reads_hidden_states else None
    if learned is not None:
        calibration = JudgeCalibration(
            learned.grounded_at, learned.not_grounded_below, ("support",), learned
        )
    else:
        calibration = CALIBRATIONS[(profile, reader)]
    overrides = {"grounded_at": grounded_at, "not_grounded_below": not_grounded_below}
    return replace(calibration, **{k: v for k, v in overrides.items() if v is not None})


def own_thresholds(grounded_at: float | None, not_grounded_below: float | None) -> JudgeCalibration:
    """A calibration of the user's own thresholds (either one alone is both) for a model that
    has none of ours: P(yes) of the questions of the strongest calibration."""
    if grounded_at is None and not_grounded_below is None:
        raise ValueError("give grounded_at, not_grounded_below or both")
    high = grounded_at if grounded_at is not None else not_grounded_below
    low = not_grounded_below if not_grounded_below is not None else high
    return JudgeCalibration(high, low, CALIBRATIONS[("default", "llama.cpp")].questions)  # type: ignore[arg-type]


#: Where a fact-checker's support says supported: its authors' cut (MiniCheck labels a claim
#: supported when its probability is above 0.5; the judge's ``grounded`` is at or above).
CHECKER_CUT = 0.5


def checker_thresholds(
    grounded_at: float | None = None, not_grounded_below: float | None = None
) -> JudgeCalibration:
    """The calibration of a fact-checker judge (``backend.engines.fact_checkers``): its
    authors' cut ``CHECKER_CUT``, or the user's own thresholds (either one alone is both), on
    the support question alone (the checker's reading stands as its answer)."""
    high = grounded_at if grounded_at is not None else not_grounded_below
    high = CHECKER_CUT if high is None else high
    low = not_grounded_below if not_grounded_below is not None else high
    return JudgeCalibration(high, low, ("support",))
