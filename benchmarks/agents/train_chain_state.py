"""Trains the chain-state reading (``backend.chat.chain_state``) on the states
``benchmarks.agents.state_reading`` read: a logistic regression over the model's final hidden
state at the agent prompt's answer position and the logit of its share of a call's opening,
labelled by whether the solution chain goes on.

    python -m benchmarks.agents.train_chain_state --states benchmarks/.state-reading.npz

Development tasks only (``tasks.jsonl``). Folds leave one task out, its states in every tool
order together; the regularisation strength is the one of ``C_GRID`` with the best
out-of-fold balanced accuracy at 0.5, and the threshold the cut between the out-of-fold
readings that maximises it (``benchmarks.judge.train``'s rules). Writes
``backend/chat/chain_states/<profile>-llama.cpp.npz`` and its ``.json`` record.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from backend.chat.call_after_results import CALL_AFTER_RESULTS_FROM
from backend.chat.chain_state import parameters_path
from backend.groundedness.learned import LearnedReading
from benchmarks.judge.train import (
    _logit,
    _pipeline,
    balanced_accuracy,
    best_threshold,
    reading_from,
)

C_GRID = (0.001, 0.01, 0.1, 1.0)
#: The share alone decides at this threshold (no training; ``share_rule`` in the record).
SHARE_RULE = CALL_AFTER_RESULTS_FROM["default"]


def examples(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    """(features, labels, task ids, rows) of the stored states."""
    with np.load(path) as stored:
        rows = json.loads(str(stored["rows"]))
        hidden = stored["agent"].astype(np.float64)
    shares = np.array([[_logit(row["share"])] for row in rows])
    labels = np.array([row["more"] for row in rows], dtype=int)
    return np.hstack([hidden, shares]), labels, np.array([row["id"] for row in rows]), rows


def out_of_task(x: np.ndarray, y: np.ndarray, tasks: np.ndarray, c: float) -> np.ndarray:
    """Each state's reading from the model fitted without its task's states."""
    readings = np.zeros(len(y))
    for task in sorted(set(tasks)):
        held = tasks == task
        readings[held] = _pipeline(c).fit(x[~held], y[~held]).predict_proba(x[held])[:, 1]
    return readings


def _figures(y: np.ndarray, readings: np.ndarray, threshold: float) -> dict:
    from sklearn.metrics import roc_auc_score

    called = readings >= threshold
    return {
        "auc": round(float(roc_auc_score(y, readings)), 3),
        "balanced_accuracy": round(balanced_accuracy(y, readings, threshold), 3),
        "needed_missed": f"{int((~called[y == 1]).sum())} of {int(y.sum())}",
        "done_called": f"{int(called[y == 0].sum())} of {int((y == 0).sum())}",
    }


def train(states: Path, profile: str) -> dict:
    x, y, tasks, rows = examples(states)
    by_c = {c: out_of_task(x, y, tasks, c) for c in C_GRID}
    accuracy = {c: balanced_accuracy(y, readings, 0.5) for c, readings in by_c.items()}
    c = max(accuracy, key=accuracy.get)
    threshold = best_threshold(y, by_c[c])
    orders = np.array([row["order"] for row in rows])
    share_only = out_of_task(x[:, -1:], y, tasks, 1.0)
    fitted = reading_from(_pipeline(c).fit(x, y))
    reading = LearnedReading(fitted.weights, fitted.p_yes_weight, fitted.bias, threshold, threshold)
    path = parameters_path(profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    reading.save(path)
    record = {
        "what": "logistic regression over (final hidden state, logit of the share of a call's "
        "opening) at the answer position of the agent prompt after tool results; 1: the "
        "solution chain makes another call",
        "profile": profile,
        "reader": "llama.cpp",
        "data": "benchmarks/agents/tasks.jsonl (development tasks), every state of each "
        "task's solution chain, tools in the orders of state_reading.READ_ORDERS",
        "states": int(len(y)),
        "needing_a_call": int(y.sum()),
        "tasks": len(set(tasks)),
        "orders": sorted(set(orders)),
        "folds": "one task left out at a time (its states in every order together)",
        "seed": "none drawn: the shuffled orders are seeded by state_reading.READ_ORDERS",
        "C": c,
        "C_grid": {str(k): round(v, 4) for k, v in accuracy.items()},
        "threshold_from_out_of_fold": round(threshold, 4),
        "cross_validated": {
            "learned": _figures(y, by_c[c], threshold),
            "learned_by_order": {
                o: _figures(y[orders == o], by_c[c][orders == o], threshold)
                for o in sorted(set(orders))
            },
            "share_alone": _figures(y, share_only, 0.5),
        },
        "share_rule": _figures(y, np.array([row["share"] for row in rows]), SHARE_RULE),
        "rebuild": f"make train-chain-state PROFILE={profile}",
    }
    path.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--states", type=Path, required=True)
    parser.add_argument("--profile", default="default", choices=["default"])
    args = parser.parse_args()
    print(json.dumps(train(args.states, args.profile), indent=2))


if __name__ == "__main__":
    main()
