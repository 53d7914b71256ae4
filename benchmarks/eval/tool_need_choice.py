"""Choosing the tool-need check's question and threshold from ``benchmarks.eval.tool_need``'s
readings, by cross-validation: in each of five folds (stratified by whether a tool is needed)
the threshold with the best balanced accuracy on the other four folds is applied to the fold.

    python -m benchmarks.eval.tool_need_choice benchmarks/eval/results-tool-need-default.jsonl

A case counts as right when the reply ends with a call exactly when a tool is needed: a reply
the model made without a call is right for a message that needs none whatever the check reads.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from backend.chat.tool_need import TOOL_NEED_THRESHOLDS

FOLDS = 5


def outcomes(rows: list[dict], question: str, threshold: float) -> np.ndarray:
    """Whether each case ends right with the check at ``threshold`` on ``question``."""
    kept = [bool(r["called"]) and r[question] >= threshold for r in rows]
    return np.array([k == r["needed"] for k, r in zip(kept, rows, strict=True)])


def balanced(rows: list[dict], right: np.ndarray) -> float:
    needed = np.array([r["needed"] for r in rows])
    return float((right[needed].mean() + right[~needed].mean()) / 2)


def best_threshold(rows: list[dict], question: str) -> float:
    candidates = sorted({0.0} | {r[question] + 1e-9 for r in rows if r["called"]})
    return max(candidates, key=lambda t: (balanced(rows, outcomes(rows, question, t)), -t))


def folds(rows: list[dict]) -> list[list[int]]:
    """Round-robin over each class in file order: a fixed split, no seed."""
    assigned: list[list[int]] = [[] for _ in range(FOLDS)]
    for label in (True, False):
        for n, i in enumerate(i for i, r in enumerate(rows) if r["needed"] is label):
            assigned[n % FOLDS].append(i)
    return assigned


def cross_validated(rows: list[dict], question: str) -> tuple[float, float, list[float]]:
    """(accuracy, balanced accuracy) over the folds' held-out cases, and the thresholds."""
    right = np.zeros(len(rows), dtype=bool)
    chosen = []
    for fold in folds(rows):
        train = [r for i, r in enumerate(rows) if i not in fold]
        threshold = best_threshold(train, question)
        chosen.append(round(threshold, 3))
        test = [rows[i] for i in fold]
        right[fold] = outcomes(test, question, threshold)
    return float(right.mean()), balanced(rows, right), chosen


#: Readings made of two questions' readings, where the file has both: the tool question
#: and the model's doubt that it can answer alone, averaged.
COMBINED = {"tool+known": ("tool", "known")}


def with_combined(rows: list[dict]) -> list[dict]:
    for row in rows:
        for key, parts in COMBINED.items():
            if all(part in row for part in parts):
                values = [row[part] for part in parts]
                row[key] = None if None in values else sum(values) / len(values)
    return rows


#: The check as shipped asks the first question where one tool is offered and the second
#: where several are, each with its own threshold (``backend.chat.tool_need``).
SHIPPED = {False: "tool", True: "tool_listed"}


def shipped(rows: list[dict]) -> None:
    """Each question cross-validated on the rows it is asked for, and the whole set at the
    profile's thresholds."""
    thresholds = TOOL_NEED_THRESHOLDS["default"]
    assert thresholds is not None
    right = []
    for among_tools, question in SHIPPED.items():
        part = [r for r in rows if (r["tools_offered"] > 1) is among_tools]
        accuracy, balanced_accuracy, chosen = cross_validated(part, question)
        threshold = thresholds.among_tools if among_tools else thresholds.alone
        at_threshold = outcomes(part, question, threshold)
        right += list(at_threshold)
        print(
            f"as shipped, {'several tools' if among_tools else 'one tool'} ({len(part)} cases, "
            f"{question}): cross-validated {accuracy:.3f} (balanced {balanced_accuracy:.3f}), "
            f"fold thresholds {chosen}; at {threshold} {at_threshold.mean():.3f}"
        )
    print(f"as shipped, all {len(right)} cases: {sum(right) / len(right):.3f} right")


def main() -> None:
    rows = with_combined([json.loads(line) for line in open(sys.argv[1], encoding="utf-8")])
    fields = ("id", "language", "needed", "called", "tools_offered")
    questions = [k for k in rows[0] if k not in fields]
    needed = sum(r["needed"] for r in rows)
    print(
        f"{len(rows)} cases, {needed} need a tool; no check: "
        f"{outcomes(rows, questions[0], 0.0).mean():.3f} right"
    )
    for question in questions:
        current = outcomes(rows, question, 0.4)
        accuracy, balanced_accuracy, chosen = cross_validated(rows, question)
        whole = best_threshold(rows, question)
        print(
            f"{question}: at 0.4 {current.mean():.3f} (balanced {balanced(rows, current):.3f}); "
            f"cross-validated {accuracy:.3f} (balanced {balanced_accuracy:.3f}), fold thresholds "
            f"{chosen}; on all rows {whole:.3f}"
        )
    if all("tools_offered" in r and "tool_listed" in r for r in rows):
        shipped(rows)


if __name__ == "__main__":
    main()
