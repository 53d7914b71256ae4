"""The groundedness judge against the judge of the release before it, side by side in one run.

    .venv/bin/python -m benchmarks.judge_speed [--profile default] [--repeats 2]

The earlier release is checked out beside this tree (``git worktree``, at ``BEFORE``) and each
side runs in a child process of the same interpreter that imports its own tree's ``backend``:
the same checks through the same public path (``Backend.chat`` with a groundedness request),
the same models, the same machine, the sides alternating (before, ours, ours, before...) so
that a slow phase of the machine is shared. Each process first answers one check that is not
timed (loading the models; what every check shares, the judge's instruction, is then cached
as it is in a running service). Short checks are one to four sentences against a context of
at most about 200 tokens; long ones are RAG-sized: a ~2,000-token document and three or four
claims. All are pairs of the second groundedness set's train split.

Each side's verdicts are counted against the pairs' labels too (a note, not a figure: nine
pairs say little of accuracy, which ``benchmarks.eval.calibrate`` measures).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.eval.run_eval import EVAL_DIR, load_jsonl
from benchmarks.measure import Figure, print_table

#: The release before the learned reading (issue 32): the shared-prefix judge reading P(yes)
#: alone. (Issue 19 measured the shared-prefix judge against 02aa581, the release before it,
#: whose judge asked each question with its own instruction and worked examples.)
BEFORE = "9eb3659"
ROOT = Path(__file__).resolve().parent.parent
#: Second-set train pairs, both labels: short ones in three languages, and long ones.
SHORT_CHECKS = ("v2-081", "v2-083", "v2-166", "v2-168", "v2-206", "v2-208")
LONG_CHECKS = ("v2-001", "v2-004", "v2-067")
WARM_UP = "v2-101"

#: What each side's child process runs: times the checks named on its command line.
_CHILD = """
import json, sys, time
from backend.groundedness.request import groundedness_request, read_verdict
from backend.backends.local import InProcessBackend
profile, warm_up, *pairs = json.loads(sys.argv[1])
backend = InProcessBackend(profile=profile)
backend.chat(groundedness_request(*warm_up))
timed = []
for context, response in pairs:
    started = time.perf_counter()
    verdict = read_verdict(backend.chat(groundedness_request(context, response)))
    timed.append((time.perf_counter() - started, verdict))
backend.close()
print(json.dumps(timed))
"""


def worktree(commit: str, folder: Path) -> Path:
    """A checkout of ``commit`` in ``folder`` (a detached ``git worktree``)."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(folder), commit],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"the judge's baseline is the tree at {commit}, which git could not check out "
            f"(a shallow clone lacks it: git fetch --unshallow): {done.stderr.strip()}"
        )
    return folder


def time_checks(tree: Path, profile: str, pairs: list[tuple[str, str]]) -> list[tuple[float, str]]:
    """Seconds and verdict of each pair's check, by the judge of ``tree`` in a fresh
    process."""
    cases = {c["id"]: c for c in load_jsonl("groundedness_v2.jsonl")}
    warm_up = (cases[WARM_UP]["context"], cases[WARM_UP]["response"])
    argument = json.dumps([profile, warm_up, *pairs])
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, argument],
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def judge_figures(profile: str, repeats: int) -> list[Figure]:
    """Seconds per short and per long check, the earlier release's judge as the baseline."""
    cases = {c["id"]: c for c in load_jsonl("groundedness_v2.jsonl")}
    kinds = {"short": SHORT_CHECKS, "long": LONG_CHECKS}
    ids = [*SHORT_CHECKS, *LONG_CHECKS]
    pairs = [(cases[i]["context"], cases[i]["response"]) for i in ids]
    runs: dict[str, list[list[tuple[float, str]]]] = {"before": [], "ours": []}
    with tempfile.TemporaryDirectory(prefix="core-judge-before-") as folder:
        before = worktree(BEFORE, Path(folder) / "tree")
        try:
            for repeat in range(repeats):
                for side in ("before", "ours") if repeat % 2 == 0 else ("ours", "before"):
                    runs[side].append(
                        time_checks(before if side == "before" else ROOT, profile, pairs)
                    )
                    print(f"  {side}: {sum(s for s, _ in runs[side][-1]):.1f} s", flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                check=False,
                capture_output=True,
            )

    def per_check(side: str, kind: str) -> float:
        """Mean seconds per check of this kind, the median over repetitions of each check."""
        chosen = [n for n, i in enumerate(ids) if i in kinds[kind]]
        return statistics.mean(statistics.median(run[n][0] for run in runs[side]) for n in chosen)

    def right(side: str, kind: str) -> str:
        verdicts = [(i, v) for run in runs[side] for i, (_, v) in zip(ids, run, strict=True)]
        hits = sum(cases[i]["label"] == v for i, v in verdicts if i in kinds[kind])
        return f"{hits}/{len(kinds[kind]) * len(runs[side])}"

    goals = {"short": "<= 1.0 (no slower)", "long": "<= 1.0 (no slower)"}
    notes = {
        "short": f"{len(SHORT_CHECKS)} pairs (en, ko, ja), 2-4 sentences, ~200-token contexts",
        "long": f"{len(LONG_CHECKS)} pairs (en, en, ja), ~2,000-token contexts, 3-4 claims",
    }
    return [
        Figure(
            f"judge_seconds_per_{kind}_check",
            "s/check",
            per_check("before", kind),
            per_check("ours", kind),
            goals[kind],
            f"profile {profile}; {notes[kind]}; baseline: the judge at {BEFORE}, same path, "
            f"same machine, alternating processes, median of {repeats}; verdicts matching the "
            f"label: before {right('before', kind)}, ours {right('ours', kind)}",
        )
        for kind in kinds
    ]


def _figures(name: str, summary: dict) -> str:
    languages = summary["balanced_accuracy_by_language"].items()
    return (
        f"  {name}: balanced accuracy {summary['balanced_accuracy']:.3f}, long contexts "
        f"{summary['balanced_accuracy_long_context']:.3f}, by language "
        + ", ".join(f"{k} {v:.3f}" for k, v in languages)
        + f"; notSure on clear {summary['not_sure_rate_clear']:.3f}, "
        f"on ambiguous {summary['not_sure_rate_ambiguous']:.3f}"
    )


def accuracy_lines(profile: str) -> list[str]:
    """The judge's accuracy figures as measured by ``benchmarks.eval.calibrate`` (each
    reader's cross-validated figures) and ``make eval`` (the held-out split, read by this
    machine's reader): read from their files, not measured again here."""
    lines = []
    for reader in ("llama.cpp", "transformers"):
        path = EVAL_DIR / f"calibration-{profile}-{reader}.json"
        if not path.exists():
            lines.append(f"no calibration file {path.name}")
            continue
        report = json.loads(path.read_text(encoding="utf-8"))
        lines.append(f"{path.name} (questions: {', '.join(report['questions'])})")
        lines.append(_figures("all, cross-validated", report["cross_validated"]))
        for name, summary in report["cross_validated_by_set"].items():
            lines.append(_figures(f"{name}, cross-validated", summary))
    results = json.loads((EVAL_DIR / f"results-{profile}.json").read_text(encoding="utf-8"))
    if "groundedness_heldout" in results:
        summary = results["groundedness_heldout"]["summary"]
        reader = results["groundedness_engine"]
        lines.append(_figures(f"second set's test split, held out ({reader})", summary))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["default", "small"], default="default")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    print_table(judge_figures(args.profile, args.repeats))
    print("\n".join(accuracy_lines(args.profile)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
