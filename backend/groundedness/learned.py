"""The judge's learned reading: trained weights over what the chat model computes anyway.

The judge asks the chat model whether a chunk supports a claim and reads P(yes) at the answer
position. The same forward pass also leaves the model's final hidden state there, a vector
(1,536 numbers for the default model) that says far more about the pair than the two logits
of "yes" and "no". A logistic regression over that vector and logit(P(yes)), trained on
public NLI and fact-verification data rendered through the judge's own prompt
(``benchmarks/judge``), gives the chunk's support instead: no extra forward pass, a few
kilobytes of weights per (model profile, reader).

The parameters live beside this module in ``readers/<profile>-<reader>.npz``, each with a
``.json`` record of the data, split, seed and figures it came from; ``make train-judge``
rebuilds them. A reader with no trained parameters (a model the user names, an engine behind
an API) keeps the P(yes) reading and its calibrated thresholds.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

READERS = Path(__file__).resolve().parent / "readers"


def parameters_path(profile: str, reader: str) -> Path:
    """Where the trained parameters for ``profile``'s model read by ``reader`` live."""
    return READERS / f"{profile}-{reader}.npz"


@dataclass(frozen=True, eq=False)
class LearnedReading:
    """support = sigmoid(weights . hidden + p_yes_weight * logit(P(yes)) + bias).

    The training's standardisation is folded into the weights, so reading is one dot
    product.
    """

    weights: np.ndarray
    p_yes_weight: float
    bias: float
    #: The verdict's thresholds on this support, chosen with the weights
    #: (``calibration.JudgeCalibration``); equal where no notSure band is kept.
    grounded_at: float = 0.5
    not_grounded_below: float = 0.5

    def support(self, p_yes: float, hidden: np.ndarray) -> float:
        if hidden.shape != self.weights.shape:
            raise ValueError(
                f"the learned reading was trained on hidden states of {self.weights.shape[0]} "
                f"numbers, got {hidden.shape[0]}: it belongs to another model"
            )
        p = min(max(p_yes, 1e-6), 1.0 - 1e-6)
        score = float(self.weights @ hidden.astype(np.float64))
        score += self.p_yes_weight * math.log(p / (1.0 - p)) + self.bias
        return 1.0 / (1.0 + math.exp(-score))

    def save(self, path: Path) -> None:
        np.savez(
            path,
            weights=self.weights.astype(np.float32),
            p_yes_weight=np.float64(self.p_yes_weight),
            bias=np.float64(self.bias),
            thresholds=np.array([self.grounded_at, self.not_grounded_below]),
        )

    @classmethod
    def load(cls, path: Path) -> LearnedReading:
        with np.load(path) as stored:
            return cls(
                weights=stored["weights"].astype(np.float64),
                p_yes_weight=float(stored["p_yes_weight"]),
                bias=float(stored["bias"]),
                grounded_at=float(stored["thresholds"][0]),
                not_grounded_below=float(stored["thresholds"][1]),
            )


@functools.cache
def learned_reading_for(profile: str, reader: str) -> LearnedReading | None:
    """The trained reading of ``profile``'s model by ``reader``, if one was trained (loaded
    once per process)."""
    path = parameters_path(profile, reader)
    return LearnedReading.load(path) if path.exists() else None
