"""The learned judge against the P(yes) judge on the measured sets, from collected readings.

For every case of a measured set (``datasets.MEASURING``, collected by
``benchmarks.judge.collect``) the response's support is worked out as the service's judge
works it out (each claim's best chunk, the weakest claim), once with the shipped learned
reading and once with P(yes) alone, and each is cut at its own calibrated thresholds
(``backend.groundedness.calibration``). Prints balanced accuracy by set, language and
category, and how often the notSure band catches ambiguous and clear pairs; writes
``benchmarks/judge/results-<profile>.json``.

    python -m benchmarks.judge.evaluate --profile default
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np

from backend.groundedness.calibration import CALIBRATIONS, calibration_for, verdict_for
from backend.groundedness.learned import learned_reading_for
from benchmarks.judge.collect import decode, load
from benchmarks.judge.datasets import MEASURING, ROOT


def response_support(row: dict, chunk_support) -> float:
    """The weakest claim's best chunk, as ``GroundednessJudge.read`` works it out."""
    best: dict[int, float] = defaultdict(float)
    for reading in row["readings"]:
        best[reading["claim"]] = max(best[reading["claim"]], chunk_support(reading))
    return min(best.values())


def figures_of(pairs: list[tuple[int, bool]]) -> dict:
    """Balanced accuracy (None with one label only) and the share called grounded, of
    (label, called grounded) pairs."""
    labels = np.array([label for label, _ in pairs])
    said = np.array([grounded for _, grounded in pairs])
    bacc = None
    if len(set(labels.tolist())) == 2:
        bacc = round(float(np.mean([said[labels == 1].mean(), (~said[labels == 0]).mean()])), 3)
    return {"n": len(pairs), "bacc": bacc, "grounded_rate": round(float(said.mean()), 3)}


def evaluate(profile: str, names: list[str]) -> dict:
    learned = learned_reading_for(profile, "llama.cpp")
    old = CALIBRATIONS[(profile, "llama.cpp")]
    judges = {"p_yes": (lambda r: r["p_yes"], old)}
    if learned is not None:
        judges["learned"] = (
            lambda r: learned.support(r["p_yes"], decode(r["hidden"])),
            calibration_for(profile, "llama.cpp"),
        )
    results = {}
    for name in names:
        rows = load(profile, name)
        if not rows:
            continue
        entry: dict = {"cases": len(rows), "expected": len(MEASURING[name]())}
        for judge, (chunk_support, calibration) in judges.items():
            verdicts = [
                verdict_for(response_support(row, chunk_support), *calibration.thresholds)
                for row in rows
            ]
            clear = [
                (row, v) for row, v in zip(rows, verdicts, strict=True) if not row["ambiguous"]
            ]
            groups: dict[str, list] = defaultdict(list)
            for row, verdict in clear:
                for key in ("all", f"lang={row['language']}", f"cat={row['category']}"):
                    groups[key].append((row["label"], verdict == "grounded"))
            figures = {key: figures_of(pairs) for key, pairs in sorted(groups.items())}
            # LLM-AggreFact counts ambiguous (partially supported) pairs as not grounded.
            figures["all_with_ambiguous"] = figures_of(
                [(row["label"], v == "grounded") for row, v in zip(rows, verdicts, strict=True)]
            )
            ambiguous = [v for row, v in zip(rows, verdicts, strict=True) if row["ambiguous"]]
            figures["not_sure"] = {
                "clear": round(np.mean([v == "notSure" for _, v in clear]), 3) if clear else None,
                "ambiguous": round(np.mean([v == "notSure" for v in ambiguous]), 3)
                if ambiguous
                else None,
            }
            entry[judge] = figures
        results[name] = entry
        line = "  ".join(
            f"{judge} {entry[judge]['all_with_ambiguous']['bacc']}" for judge in judges
        )
        print(f"{name} ({entry['cases']}/{entry['expected']}): {line}", flush=True)
    path = ROOT / "benchmarks" / "judge" / f"results-{profile}.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default", choices=["default", "small"])
    parser.add_argument(
        "--sets", default="kornli-dev,jnli-valid", help=f"of {', '.join(MEASURING)}"
    )
    args = parser.parse_args()
    evaluate(args.profile, args.sets.split(","))


if __name__ == "__main__":
    main()
