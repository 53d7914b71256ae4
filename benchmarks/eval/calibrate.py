"""Calibrate the groundedness thresholds of a profile on the groundedness set.

    .venv/bin/python -m benchmarks.eval.calibrate --profile small
    .venv/bin/python -m benchmarks.eval.calibrate --profile default --set groundedness_v2.jsonl
    .venv/bin/python -m benchmarks.eval.calibrate --engine-url http://host:8080 \
        --engine-chat-model Qwen/Qwen2.5-7B-Instruct

With ``--engine-url`` the judge's prompts are read by an OpenAI-compatible engine's model
(``backend.remote_engine``): the thresholds printed are the ``grounded_at`` and
``not_grounded_below`` to pass with that engine (``backend.connect(engine_url=...,
grounded_at=..., not_grounded_below=...)``, or ``serve --grounded-at ...``), written to
``calibration-engine-<model>.json``.

Runs the judge (``backend.groundedness.judge``) on every pair, keeps each pair's support (the
weakest claim's P(yes)) and writes them with the chosen thresholds to
``calibration-<profile>-<reader>.json`` (``-<set>`` added for another set than the first; of
a set with splits only the train split is read, and cross-validated on its own folds), where
the reader is what evaluated the judge's prompts
on this machine (``llama.cpp`` or ``transformers``; ``CORE_GROUNDEDNESS_ENGINE`` picks). The
thresholds are chosen by ``choose_thresholds``; copy them into
``backend.groundedness.calibration.CALIBRATIONS``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.eval import metrics
from benchmarks.eval.run_eval import EVAL_DIR, load_jsonl, summarise_groundedness

#: The first groundedness set, which has no splits; ``groundedness_v2.jsonl`` has.
DEFAULT_SET = "groundedness.jsonl"
#: Most notSure verdicts tolerated on clear cases when widening the band (issue 19: 5%).
MAX_NOT_SURE_CLEAR = 0.05
#: How many times more often than on clear cases a band must say notSure on ambiguous ones
#: to be kept (issue 19: at least three times).
NOT_SURE_AMBIGUOUS_RATIO = 3.0
#: Balanced accuracy given up, at most, for a wider notSure band.
ACCURACY_SLACK = 0.02


def _clear_accuracy(rows: Sequence[dict[str, Any]], high: float, low: float) -> tuple[float, float]:
    clear = [r for r in rows if r["clear"]]
    verdicts = [metrics.threshold_verdict(r["support"], high, low) for r in clear]
    accuracy = metrics.balanced_accuracy([r["label"] for r in clear], verdicts)
    return accuracy, metrics.rate(verdicts, metrics.NOT_SURE)


def _not_sure_rate_ambiguous(rows: Sequence[dict[str, Any]], high: float, low: float) -> float:
    """NaN without ambiguous pairs, which compares false: no band is kept then."""
    ambiguous = [r for r in rows if not r["clear"]]
    verdicts = [metrics.threshold_verdict(r["support"], high, low) for r in ambiguous]
    return metrics.rate(verdicts, metrics.NOT_SURE)


def choose_thresholds(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The (grounded_at, not_grounded_below) pair for these supports.

    First the single cut with the best balanced accuracy on the clear cases (the midpoint
    between neighbouring supports); then the widest notSure band around it that keeps
    notSure on at most ``MAX_NOT_SURE_CLEAR`` of the clear cases and the accuracy within
    ``ACCURACY_SLACK`` of the best, and that marks ambiguity: it holds at least
    ``NOT_SURE_AMBIGUOUS_RATIO`` times the share of the ambiguous cases it holds of the clear
    ones. A band that does not is only a hedge, and the
    single cut stays (the verdict is then never notSure: the model's support does not tell
    ambiguous evidence from clear).
    """
    values = sorted({round(r["support"], 6) for r in rows if r["clear"]})
    cuts = [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)] or values
    best_cut = max(cuts, key=lambda c: (_clear_accuracy(rows, c, c)[0], -abs(c - 0.5)))
    best, _ = _clear_accuracy(rows, best_cut, best_cut)
    chosen = (best_cut, best_cut)
    for high in [c for c in cuts if c >= best_cut]:
        for low in [c for c in cuts if c <= best_cut]:
            accuracy, not_sure = _clear_accuracy(rows, high, low)
            if (
                accuracy >= best - ACCURACY_SLACK
                and not_sure <= MAX_NOT_SURE_CLEAR
                and _not_sure_rate_ambiguous(rows, high, low) >= NOT_SURE_AMBIGUOUS_RATIO * not_sure
                and _not_sure_rate_ambiguous(rows, high, low) > 0
                and high - low > chosen[0] - chosen[1]
            ):
                chosen = (high, low)
    accuracy, not_sure = _clear_accuracy(rows, *chosen)
    return {
        "grounded_at": round(chosen[0], 4),
        "not_grounded_below": round(chosen[1], 4),
        "balanced_accuracy": accuracy,
        "not_sure_rate_clear": not_sure,
        "best_single_cut_accuracy": best,
    }


def cross_validated_accuracy(
    rows: Sequence[dict[str, Any]], folds: int = 5, seeds: int = 10
) -> float:
    """Balanced accuracy on the clear pairs with thresholds chosen without the pair judged.

    The thresholds are fitted on the same set they are reported on; this is the estimate
    for pairs the calibration never saw: ``folds``-fold, averaged over ``seeds`` shuffles
    (every fit also sees the ambiguous pairs, which decide whether a notSure band is kept).
    Rows that carry their own ``fold`` (the second set's, fixed per context) are scored on
    those folds instead (``fixed_fold_accuracy``).
    """
    if rows and all(r.get("fold") is not None for r in rows):
        return fixed_fold_accuracy(rows)
    clear = [r for r in rows if r["clear"]]
    ambiguous = [r for r in rows if not r["clear"]]
    scores = []
    for seed in range(seeds):
        order = list(range(len(clear)))
        random.Random(seed).shuffle(order)
        verdicts = [""] * len(clear)
        for fold in range(folds):
            held_out = set(order[fold::folds])
            fitted_on = [r for i, r in enumerate(clear) if i not in held_out] + ambiguous
            chosen = choose_thresholds(fitted_on)
            for i in held_out:
                verdicts[i] = metrics.threshold_verdict(
                    clear[i]["support"], chosen["grounded_at"], chosen["not_grounded_below"]
                )
        scores.append(metrics.balanced_accuracy([r["label"] for r in clear], verdicts))
    return sum(scores) / len(scores)


def fixed_fold_accuracy(rows: Sequence[dict[str, Any]]) -> float:
    """Balanced accuracy on the clear pairs, each scored with thresholds fitted on the other
    folds' pairs (clear and ambiguous): no fit sees a context its fold is scored on."""
    verdicts = {}
    for fold in sorted({r["fold"] for r in rows}):
        chosen = choose_thresholds([r for r in rows if r["fold"] != fold])
        for r in rows:
            if r["fold"] == fold and r["clear"]:
                verdicts[r["id"]] = metrics.threshold_verdict(
                    r["support"], chosen["grounded_at"], chosen["not_grounded_below"]
                )
    clear = [r for r in rows if r["clear"]]
    return metrics.balanced_accuracy(
        [r["label"] for r in clear], [verdicts[r["id"]] for r in clear]
    )


def calibration_cases(set_name: str) -> list[dict[str, Any]]:
    """The pairs a calibration reads from ``set_name``: all of a set without splits, the
    train split of one with them (its test split is never read to choose anything)."""
    cases = load_jsonl(set_name)
    return [case for case in cases if case.get("split", "train") == "train"]


def collect_supports(
    profile: str,
    limit: int | None = None,
    *,
    contrast: bool = True,
    engine: dict[str, Any] | None = None,
    set_name: str = DEFAULT_SET,
) -> tuple[str, list[dict[str, Any]]]:
    """The reader of the judge's prompts, and each pair's support as that reader gives it
    (with or without the contrast question, ``backend.groundedness.CONTRAST``). ``engine``:
    ``engine_url``, ``chat_model`` and ``engine_api_key`` of an engine to read them instead."""
    from backend.groundedness.judge import GroundednessJudge
    from backend.groundedness.service import JudgeReader
    from backend.local import InProcessBackend

    if engine:
        from backend.remote_engine.api import EngineAPI
        from backend.remote_engine.judge_reading import EngineYesNoReading, embedded_chat_tokenizer
        from backend.remote_engine.settings import engine_api_url

        api = EngineAPI(
            engine_api_url(engine["engine_url"]), engine.get("engine_api_key"), 120.0, 2
        )
        model = engine.get("chat_model") or api.only_model("chat model")
        reading = EngineYesNoReading(api, model, embedded_chat_tokenizer("small"))
        reader = JudgeReader(reading)
    else:
        reader = InProcessBackend(profile=profile).judge_reader()
    judge = GroundednessJudge(reader.engine, contrast=contrast)
    rows = []
    for case in calibration_cases(set_name)[:limit]:
        started = time.perf_counter()
        judgement = judge.assess(case["context"], case["response"])
        rows.append(
            {
                "id": case["id"],
                "label": case["label"],
                "clear": case["clear"],
                "long_context": case["long_context"],
                "fold": case.get("fold"),
                "support": judgement.support,
                "claims": [list(c) for c in judgement.claims],
                "prompt_tokens": judgement.prompt_tokens,
                "seconds": time.perf_counter() - started,
            }
        )
        print(f"{case['id']} {case['label']:<12} {judgement.support:.3f}", flush=True)
    kind = f"engine-{reading.model.replace('/', '--')}" if engine else reader.kind
    return kind, rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=("default", "small"), default="small")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--set",
        default=DEFAULT_SET,
        help="pairs file in benchmarks/eval (of a set with splits, its train split only)",
    )
    parser.add_argument("--supports", type=Path, default=None, help="reuse a calibration file")
    parser.add_argument("--engine-url", help="read the prompts with this engine's model")
    parser.add_argument("--engine-chat-model", help="the engine's model id (default: its only one)")
    parser.add_argument("--engine-api-key", help="bearer key for the engine")
    parser.add_argument(
        "--contrast",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also ask the contrast question (default: yes)",
    )
    args = parser.parse_args(argv)
    if args.supports:
        earlier = json.loads(args.supports.read_text(encoding="utf-8"))
        reader, rows, contrast = earlier["reader"], earlier["pairs"], earlier["contrast"]
        set_name = earlier.get("set", DEFAULT_SET)
    else:
        contrast, set_name = args.contrast, args.set
        engine = None
        if args.engine_url:
            engine = {
                "engine_url": args.engine_url,
                "chat_model": args.engine_chat_model,
                "engine_api_key": args.engine_api_key,
            }
        reader, rows = collect_supports(
            args.profile, args.limit, contrast=contrast, engine=engine, set_name=set_name
        )
    name = reader if reader.startswith("engine-") else f"{args.profile}-{reader}"
    if set_name != DEFAULT_SET:
        name += "-" + Path(set_name).stem
    out = EVAL_DIR / f"calibration-{name}.json"
    chosen = choose_thresholds(rows)
    chosen["cross_validated_balanced_accuracy"] = cross_validated_accuracy(rows)
    summary = summarise_at(rows, chosen["grounded_at"], chosen["not_grounded_below"], set_name)
    report = {
        "profile": args.profile,
        "reader": reader,
        "contrast": contrast,
        "set": set_name,
        **chosen,
        "summary_at_thresholds": summary,
        "pairs": rows,
    }
    out.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({**chosen, "summary_at_thresholds": summary}, indent=1))
    return 0


def summarise_at(
    rows: Sequence[dict[str, Any]], high: float, low: float, set_name: str = DEFAULT_SET
) -> dict[str, Any]:
    """The groundedness figures of ``run_eval`` for these supports under these thresholds:
    the verdicts the service gives, since the judge samples nothing."""
    cases = {c["id"]: c for c in load_jsonl(set_name)}
    return summarise_groundedness(
        [
            {
                **cases[r["id"]],
                "verdict": metrics.threshold_verdict(r["support"], high, low),
                "seconds": r["seconds"],
                "prompt_tokens": r["prompt_tokens"],
            }
            for r in rows
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
