"""Figures, interleaved repetitions and the results table: what every benchmark shares."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Figure:
    """One line of the results: a baseline and ours, in the same unit, measured in one run.

    ``ratio`` is ours / baseline; for time units (lower is better) the goal says so.
    Figures without a baseline (reported only) leave it and the ratio empty.
    """

    name: str
    unit: str
    baseline: float | None
    ours: float
    goal: str = ""
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return None if not self.baseline else self.ours / self.baseline

    def record(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "baseline": _rounded(self.baseline),
            "ours": _rounded(self.ours),
            "ratio": _rounded(self.ratio),
            "goal": self.goal,
            "note": self.note,
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")


def interleaved(
    baseline: Callable[[], float], ours: Callable[[], float], repeats: int
) -> tuple[float, float]:
    """Medians of ``repeats`` runs of each, alternating which goes first (ABBA order).

    Alternating spreads slow phases of a noisy machine (another process, a thermal dip) over
    both sides instead of charging them to whichever happened to run then.
    """
    baseline_values, our_values = [], []
    for repeat in range(repeats):
        pair = [(baseline, baseline_values), (ours, our_values)]
        for measure, values in pair if repeat % 2 == 0 else reversed(pair):
            values.append(measure())
    return statistics.median(baseline_values), statistics.median(our_values)


def rotated(measures: dict[str, Callable[[], float]], repeats: int) -> dict[str, float]:
    """Medians of ``repeats`` runs of each measure, the order rotating by one each repetition.

    ``interleaved`` for more than two sides: no side always runs first (or last).
    """
    names = list(measures)
    values: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            values[name].append(measures[name]())
    return {name: statistics.median(values[name]) for name in names}


def timed(action: Callable[[], object]) -> float:
    """Seconds ``action`` takes."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def print_table(figures: list[Figure]) -> None:
    header = f"{'name':44} {'unit':14} {'baseline':>10} {'ours':>10} {'ratio':>7}  goal"
    print(header)
    print("-" * len(header))
    for figure in figures:
        record = figure.record()
        baseline = "-" if record["baseline"] is None else f"{record['baseline']:.4g}"
        ratio = "-" if record["ratio"] is None else f"{record['ratio']:.3g}"
        print(
            f"{figure.name:44} {figure.unit:14} {baseline:>10} {record['ours']:>10.4g} "
            f"{ratio:>7}  {figure.goal}"
        )
        if figure.note:
            print(f"{'':44}   {figure.note}")


def write_results(figures: list[Figure], path: Path, keep_others: bool = False) -> None:
    """Write ``figures`` to ``path``; ``keep_others``: the figures already there that were not
    measured again stay (in place), so a partial run updates the file instead of emptying it."""
    records = [f.record() for f in figures]
    if keep_others and path.exists():
        fresh = {r["name"]: r for r in records}
        kept = [fresh.pop(r["name"], r) for r in json.loads(path.read_text())]
        records = kept + list(fresh.values())
    path.write_text(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
