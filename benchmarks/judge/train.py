"""Fit the judge's learned reading on the collected training pool and write what ships.

Reads ``benchmarks/judge/.features/<profile>/`` (``benchmarks.judge.collect``), fits a
standardised L2 logistic regression over (final hidden state, logit P(yes)) of every
single-reading training example, its regularisation chosen by 5-fold cross-validation, and
writes ``backend/groundedness/readers/<profile>-llama.cpp.npz`` with a ``.json`` record (data,
counts, seed, the cross-validated figures and the threshold chosen on the out-of-fold
supports). The measured sets are never read here.

    python -m benchmarks.judge.train --profile default
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict

import numpy as np

from backend.groundedness.learned import LearnedReading, parameters_path
from benchmarks.judge.collect import decode, load
from benchmarks.judge.datasets import LICENCES, SEED, TRAINING

#: The regularisation strengths tried (sklearn's C: smaller is stronger).
C_GRID = (0.0003, 0.001, 0.003, 0.01, 0.03)
FOLDS = 5
#: Training examples whose label a careful reader could argue (BEGIN's generic responses).
AMBIGUOUS_CATEGORIES = ("generic",)
#: A notSure band is kept only if it holds at most this share of clear pairs...
MAX_NOT_SURE_CLEAR = 0.05
#: ...and at least this many times that share of the ambiguous ones (issue 32).
NOT_SURE_AMBIGUOUS_RATIO = 3.0


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def not_sure_band(
    supports: np.ndarray, ambiguous: np.ndarray, threshold: float
) -> tuple[float, float] | None:
    """The widest band of supports around ``threshold`` whose notSure verdicts hold at most
    ``MAX_NOT_SURE_CLEAR`` of the clear examples and at least ``NOT_SURE_AMBIGUOUS_RATIO``
    times that share of the ambiguous ones; None where no band qualifies."""
    if not ambiguous.any():
        return None
    best = None
    cuts = np.quantile(np.abs(supports - threshold), np.linspace(0.0, 0.2, 41)[1:])
    for width in cuts:
        inside = np.abs(supports - threshold) < width
        clear, vague = inside[~ambiguous].mean(), inside[ambiguous].mean()
        if clear <= MAX_NOT_SURE_CLEAR and vague >= NOT_SURE_AMBIGUOUS_RATIO * max(clear, 1e-9):
            best = (float(threshold + width), float(threshold - width))
    return best


def examples(rows: list[dict]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(features, labels, case ids) of the rows' unambiguous readings: a case's every
    reading where it is not grounded and has one claim (no chunk supports it); the reading
    of a grounded one-claim case read against a single chunk (that chunk supports it)."""
    features, labels, ids = [], [], []
    for row in rows:
        readings = row["readings"]
        if row["claims"] != 1 or (row["label"] == 1 and len(readings) != 1):
            continue
        for reading in readings:
            features.append(np.append(decode(reading["hidden"]), _logit(reading["p_yes"])))
            labels.append(row["label"])
            ids.append(row["id"])
    return np.array(features), np.array(labels), ids


def _pipeline(c: float):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000))


def _folds(ids: list[str], labels: np.ndarray) -> np.ndarray:
    """A fold per case (all readings of a case in one fold), stratified by label."""
    from sklearn.model_selection import StratifiedGroupKFold

    fold = np.zeros(len(ids), dtype=int)
    splitter = StratifiedGroupKFold(n_splits=FOLDS, shuffle=True, random_state=SEED)
    for number, (_, test) in enumerate(splitter.split(np.zeros(len(ids)), labels, ids)):
        fold[test] = number
    return fold


def out_of_fold(x: np.ndarray, y: np.ndarray, fold: np.ndarray, c: float) -> np.ndarray:
    """Each example's support from the model fitted without its fold."""
    supports = np.zeros(len(y))
    for number in range(FOLDS):
        held = fold == number
        model = _pipeline(c).fit(x[~held], y[~held])
        supports[held] = model.predict_proba(x[held])[:, 1]
    return supports


def balanced_accuracy(labels: np.ndarray, supports: np.ndarray, threshold: float) -> float:
    said = supports >= threshold
    rates = [np.mean(said[labels == 1]), np.mean(~said[labels == 0])]
    return float(np.mean(rates))


def best_threshold(labels: np.ndarray, supports: np.ndarray) -> float:
    """The cut between sorted supports that maximises balanced accuracy."""
    cuts = np.unique(np.round(supports, 4))
    return float(max(cuts, key=lambda t: balanced_accuracy(labels, supports, t)))


def reading_from(model) -> LearnedReading:
    """The fitted pipeline as one dot product (the scaler folded into the weights)."""
    scaler, regression = model[0], model[1]
    weights = regression.coef_[0] / scaler.scale_
    bias = float(regression.intercept_[0] - weights @ scaler.mean_)
    return LearnedReading(weights=weights[:-1], p_yes_weight=float(weights[-1]), bias=bias)


def train(profile: str) -> dict:
    rows_by_set = {name: load(profile, name) for name in TRAINING}
    rows = [row for name_rows in rows_by_set.values() for row in name_rows]
    x, y, ids = examples(rows)
    source = {row["id"]: row["source"] for row in rows}
    fold = _folds(ids, y)
    by_c = {}
    for c in C_GRID:
        supports = out_of_fold(x, y, fold, c)
        by_c[c] = (balanced_accuracy(y, supports, 0.5), supports)
        print(f"C={c}: cross-validated balanced accuracy {by_c[c][0]:.3f}", flush=True)
    c = max(by_c, key=lambda k: by_c[k][0])
    supports = by_c[c][1]
    threshold = best_threshold(y, supports)
    vague = {row["id"] for row in rows if row["category"] in AMBIGUOUS_CATEGORIES}
    band = not_sure_band(supports, np.array([case in vague for case in ids]), threshold)
    grounded_at, not_grounded_below = band or (threshold, threshold)
    p_yes_only = out_of_fold(x[:, -1:], y, fold, 1.0)
    per_source = defaultdict(list)
    for number, case in enumerate(ids):
        per_source[source[case]].append(number)
    figures = {
        name: {
            "examples": len(idx),
            "learned": round(balanced_accuracy(y[idx], supports[idx], threshold), 3),
            "p_yes_only": round(
                balanced_accuracy(y[idx], p_yes_only[idx], best_threshold(y, p_yes_only)), 3
            ),
        }
        for name, idx in sorted(per_source.items())
    }
    model = _pipeline(c).fit(x, y)
    reading = reading_from(model)
    reading = LearnedReading(
        reading.weights, reading.p_yes_weight, reading.bias, grounded_at, not_grounded_below
    )
    reading.save(parameters_path(profile, "llama.cpp"))
    record = {
        "what": "logistic regression over (final hidden state, logit P(yes)) at the answer "
        "position of the judge's support question",
        "profile": profile,
        "reader": "llama.cpp",
        "data": {name: len(name_rows) for name, name_rows in rows_by_set.items()},
        "sources": LICENCES,
        "examples": int(len(y)),
        "positives": int(y.sum()),
        "seed": SEED,
        "folds": FOLDS,
        "C": c,
        "C_grid": {str(k): round(v[0], 4) for k, v in by_c.items()},
        "threshold_from_out_of_fold": round(threshold, 4),
        "not_sure_band": [round(not_grounded_below, 4), round(grounded_at, 4)] if band else None,
        "ambiguous_examples": len(vague),
        "cross_validated": {
            "all": round(balanced_accuracy(y, supports, threshold), 3),
            "by_source": figures,
        },
        "rebuild": f"make train-judge PROFILE={profile}",
    }
    path = parameters_path(profile, "llama.cpp").with_suffix(".json")
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default", choices=["default", "small"])
    args = parser.parse_args()
    print(json.dumps(train(args.profile), indent=2))


if __name__ == "__main__":
    main()
