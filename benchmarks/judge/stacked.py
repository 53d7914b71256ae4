"""The cross-encoder beside the chat model: does one add to the other? (issue 32)

Fits a two-feature logistic regression, logit of the chat model's P(yes) (response support as
the judge works it out) and logit of the cross-encoder's support, on the learned reading's
training pool (which the cross-encoder never trained on; ``benchmarks.judge.cross_encoder``),
5-fold cross-validated, then measures it on KorNLI dev and JNLI valid, whose chat-model
readings ``benchmarks.judge.collect`` kept. Each reading alone, at 0.5 (the cross-encoder) or
at its calibrated cut (P(yes), the learned reading), is printed beside it, and so is a
cascade at fixed confidence cuts: the cross-encoder decides where it is sure, the chat
model's learned reading reads the rest.

    python -m benchmarks.judge.stacked
"""

from __future__ import annotations

import json
import math

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from backend.groundedness.calibration import CALIBRATIONS, calibration_for
from backend.groundedness.learned import learned_reading_for
from benchmarks.judge.collect import decode, load
from benchmarks.judge.cross_encoder import OUT
from benchmarks.judge.datasets import SEED, TRAINING
from benchmarks.judge.evaluate import response_support

PROFILE = "default"
#: A cascade's fixed confidence cuts (not tuned): the cross-encoder alone decides a case whose
#: support is at least this far from 0.5 on either side.
CASCADE_CUTS = (0.9, 0.95, 0.98)


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _cross_supports(name: str) -> dict[str, float]:
    with (OUT / f"{name}.jsonl").open(encoding="utf-8") as handle:
        return {row["id"]: row["support"] for row in map(json.loads, handle)}


def table(rows: list[dict], cross: dict[str, float]):
    learned = learned_reading_for(PROFILE, "llama.cpp")
    p_yes = np.array([response_support(r, lambda x: x["p_yes"]) for r in rows])
    learned_support = np.array(
        [
            response_support(r, lambda x: learned.support(x["p_yes"], decode(x["hidden"])))
            for r in rows
        ]
    )
    cross_support = np.array([cross[r["id"]] for r in rows])
    features = np.column_stack([[_logit(p) for p in p_yes], [_logit(c) for c in cross_support]])
    labels = np.array([r["label"] for r in rows])
    return features, labels, p_yes, learned_support, cross_support


def main() -> None:
    pool = [row for name in TRAINING for row in load(PROFILE, name)]
    if not pool:
        raise SystemExit("no chat-model readings collected yet: run `make train-judge` first")
    features, labels, p_yes, learned_support, cross = table(
        pool, _cross_supports("learned-reading-pool")
    )
    model = LogisticRegression(C=1.0)
    folds = StratifiedKFold(5, shuffle=True, random_state=SEED)
    out_of_fold = cross_val_predict(model, features, labels, cv=folds, method="predict_proba")[:, 1]
    p_cut = CALIBRATIONS[(PROFILE, "llama.cpp")].thresholds[0]
    learned_cut = calibration_for(PROFILE, "llama.cpp").thresholds[0]
    stacked_figure = balanced_accuracy_score(labels, out_of_fold >= 0.5)
    learned_figure = balanced_accuracy_score(labels, learned_support >= learned_cut)
    print(
        f"pool ({len(labels)} cases, 5-fold): stacked {stacked_figure:.3f}"
        f"  cross-encoder {balanced_accuracy_score(labels, cross >= 0.5):.3f}"
        f"  P(yes) {balanced_accuracy_score(labels, p_yes >= p_cut):.3f}"
        f"  learned (trained here) {learned_figure:.3f}"
    )
    model.fit(features, labels)
    print(
        "weights (logit P(yes), logit cross-encoder):",
        model.coef_.round(3).tolist(),
        model.intercept_.round(3).tolist(),
    )
    for name in ("kornli-dev", "jnli-valid"):
        features, labels, p_yes, learned_support, cross = table(
            load(PROFILE, name), _cross_supports(name)
        )
        stacked = model.predict_proba(features)[:, 1]
        print(
            f"{name} ({len(labels)}): stacked {balanced_accuracy_score(labels, stacked >= 0.5):.3f}"
            f"  cross-encoder {balanced_accuracy_score(labels, cross >= 0.5):.3f}"
            f"  P(yes) {balanced_accuracy_score(labels, p_yes >= p_cut):.3f}"
            f"  learned {balanced_accuracy_score(labels, learned_support >= learned_cut):.3f}"
        )
        for confident in CASCADE_CUTS:
            decided = np.abs(cross - 0.5) >= confident - 0.5
            said = np.where(decided, cross >= 0.5, learned_support >= learned_cut)
            print(
                f"  cascade, the cross-encoder decides at <= {1 - confident:.2f} or >= "
                f"{confident:.2f} ({decided.mean():.0%} of cases), the learned reading the rest:"
                f" {balanced_accuracy_score(labels, said):.3f}"
            )


if __name__ == "__main__":
    main()
