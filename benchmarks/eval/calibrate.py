"""Calibrate the groundedness judge of a profile: which questions it asks, and its thresholds.

    .venv/bin/python -m benchmarks.eval.calibrate --profile small
    .venv/bin/python -m benchmarks.eval.calibrate --profile default --set groundedness_v2.jsonl
    .venv/bin/python -m benchmarks.eval.calibrate --engine-url http://host:8080 \
        --engine-chat-model Qwen/Qwen2.5-7B-Instruct
    .venv/bin/python -m benchmarks.eval.calibrate --judge-model Qwen/Qwen2.5-7B-Instruct

Reads every pair of the calibration sets (by default the first set and the second set's train
split; the second set's test split is never read to choose anything) with the judge asking
every question (``backend.groundedness.prompts.QUESTIONS``) of every chunk it would read, and
keeps each (claim, chunk) reading. From those stored readings it then chooses, without reading
the model again, which questions to ask (``QUESTION_SETS``) and the thresholds
(``choose_thresholds``), and cross-validates the whole choice on folds fixed per context
(``fold_of``): every fold is scored by questions and thresholds chosen on the other folds
alone. It writes ``calibration-<profile>-<reader>.json`` (the reader is what evaluated the
judge's prompts on this machine: ``llama.cpp`` or ``transformers``; ``CORE_GROUNDEDNESS_ENGINE``
picks), whose questions and thresholds go into
``backend.groundedness.calibration.CALIBRATIONS``.

With ``--engine-url`` the judge's prompts are read by an OpenAI-compatible engine's model
(``backend.backends.remote_engine``): the thresholds printed are the ``grounded_at`` and
``not_grounded_below`` to pass with that engine (``backend.connect(engine_url=...,
grounded_at=..., not_grounded_below=...)``, or ``serve --grounded-at ...``), written to
``calibration-engine-<model>.json``. With ``--judge-model`` a local model of the user's
choice reads them (``CORE_JUDGE_MODEL``), and its thresholds go to ``grounded_at`` and
``not_grounded_below`` beside it (``calibration-judge-<model>.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmarks.eval import metrics
from benchmarks.eval.run_eval import EVAL_DIR, load_jsonl, summarise_groundedness

#: The sets a calibration reads: the first whole, the second's train split.
DEFAULT_SETS = ("groundedness.jsonl", "groundedness_v2.jsonl")
#: The choices of questions a calibration compares (``prompts.QUESTIONS``); the contrast
#: question alone is no judge (``prompts.CONTRAST``).
QUESTION_SETS = (("support",), ("support", "contrast"))
#: Folds of the cross-validation; the second set's rows carry theirs.
FOLDS = 5
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


def support_of(row: dict[str, Any], questions: Sequence[str]) -> float:
    """The judge's support for a stored pair had it asked ``questions`` (the judge's own
    rule, ``judge.chunk_support``, replayed on the stored readings)."""
    from backend.groundedness.judge import chunk_support
    from backend.groundedness.prompts import QUESTIONS

    asked = [QUESTIONS[name] for name in questions]
    best = [0.0] * row["claims"]
    for reading in row["readings"]:
        support = chunk_support(reading["p_yes"], asked)
        best[reading["claim"]] = max(best[reading["claim"]], support)
    return min(best)


def with_supports(rows: Sequence[dict[str, Any]], questions: Sequence[str]) -> list[dict]:
    return [{**row, "support": support_of(row, questions)} for row in rows]


def choose_calibration(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The questions (of ``QUESTION_SETS``) whose supports give the best balanced accuracy
    on these rows, and their thresholds."""
    fitted = []
    for questions in QUESTION_SETS:
        chosen = choose_thresholds(with_supports(rows, questions))
        fitted.append({"questions": list(questions), **chosen})
    return max(fitted, key=lambda c: (c["balanced_accuracy"], -len(c["questions"])))


def cross_validated(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every fold judged by the questions and thresholds ``choose_calibration`` picks on the
    other folds (clear and ambiguous pairs): the figures to expect on pairs the calibration
    never saw. Returns the verdict of every row by id, and the summary figures."""
    verdicts: dict[str, str] = {}
    for fold in sorted({r["fold"] for r in rows}):
        chosen = choose_calibration([r for r in rows if r["fold"] != fold])
        for row in rows:
            if row["fold"] == fold:
                support = support_of(row, chosen["questions"])
                verdicts[row["id"]] = metrics.threshold_verdict(
                    support, chosen["grounded_at"], chosen["not_grounded_below"]
                )
    return verdicts


def fold_of(case: dict[str, Any], contexts: Sequence[str]) -> int:
    """The case's own fold (the second set's, fixed per context), else its context's place
    among the set's distinct contexts, dealt round-robin: no fold shares a context with
    another."""
    if case.get("fold") is not None:
        return int(case["fold"])
    return contexts.index(case["context"]) % FOLDS


def calibration_cases(set_names: Sequence[str], limit: int | None = None) -> list[dict[str, Any]]:
    """The pairs a calibration reads (the first ``limit`` of each set): all of a set without
    splits, the train split of one with them (its test split is never read to choose
    anything); each with its set and fold. Ids are made unique across sets by the set's name."""
    cases = []
    for set_name in set_names:
        rows = [c for c in load_jsonl(set_name) if c.get("split", "train") == "train"][:limit]
        contexts = list(dict.fromkeys(c["context"] for c in rows))
        for case in rows:
            cases.append(
                {
                    **case,
                    "id": f"{Path(set_name).stem}:{case['id']}",
                    "set": set_name,
                    "fold": fold_of(case, contexts),
                }
            )
    return cases


def collect_readings(judge: Any, cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every (claim, chunk) reading of every case by ``judge`` (which asks every question and
    reads every chunk), with the case's fields that the figures need."""
    rows = []
    for case in tqdm(cases, desc="judge readings", unit="pair"):
        started = time.perf_counter()
        assessment, readings = judge.read(case["context"], case["response"])
        rows.append(
            {
                **{k: case[k] for k in ("id", "set", "fold", "label", "clear", "long_context")},
                **{k: case[k] for k in ("language", "category")},
                "claims": len(assessment.claims),
                "readings": [
                    {"claim": r.claim, "chunk": r.chunk, "p_yes": r.p_yes} for r in readings
                ],
                "prompt_tokens": assessment.prompt_tokens,
                "seconds": time.perf_counter() - started,
            }
        )
    return rows


def make_judge(
    profile: str, engine: dict[str, Any] | None, judge_model: str | None = None
) -> tuple[str, Any]:
    """The name of the reader of the judge's prompts, and a judge reading with it that asks
    every question of every chunk. ``engine``: ``engine_url``, ``chat_model`` and
    ``engine_api_key`` of an engine to read them instead of the profile's local reader;
    ``judge_model``: a local model to read them (``CORE_JUDGE_MODEL``)."""
    from backend.groundedness.judge import GroundednessJudge
    from backend.groundedness.prompts import QUESTIONS

    if judge_model:
        from backend.engines.loader import load_chat_engine
        from backend.engines.selection import chat_engine_kind

        kind = chat_engine_kind(judge_model, "auto", None)
        reader = load_chat_engine(judge_model, kind)
        name = f"judge-{judge_model.replace('/', '--')}"
        return name, GroundednessJudge(reader, questions=list(QUESTIONS))

    if engine:
        from backend.backends.remote_engine.api import EngineAPI
        from backend.backends.remote_engine.judge_reading import (
            EngineYesNoReading,
            embedded_chat_tokenizer,
        )
        from backend.backends.remote_engine.settings import engine_api_url

        api = EngineAPI(
            engine_api_url(engine["engine_url"]), engine.get("engine_api_key"), 120.0, 2
        )
        model = engine.get("chat_model") or api.only_model("chat model")
        reading = EngineYesNoReading(api, model, embedded_chat_tokenizer("small"))
        return f"engine-{model.replace('/', '--')}", GroundednessJudge(
            reading, questions=list(QUESTIONS)
        )
    from backend.backends.local import InProcessBackend

    reader = InProcessBackend(profile=profile).judge_reader()
    return reader.kind, GroundednessJudge(reader.engine, questions=list(QUESTIONS))


def report(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The chosen calibration, fitted on every row, and the cross-validated figures: over all
    rows and over each set's rows (``summarise_at``)."""
    chosen = choose_calibration(rows)
    verdicts = cross_validated(rows)
    fitted = {
        r["id"]: metrics.threshold_verdict(
            support_of(r, chosen["questions"]), chosen["grounded_at"], chosen["not_grounded_below"]
        )
        for r in rows
    }
    sets = sorted({r["set"] for r in rows})
    return {
        **chosen,
        "cross_validated": summarise_at(rows, verdicts),
        "cross_validated_by_set": {
            s: summarise_at([r for r in rows if r["set"] == s], verdicts) for s in sets
        },
        "fitted_by_set": {
            s: summarise_at([r for r in rows if r["set"] == s], fitted) for s in sets
        },
    }


def summarise_at(rows: Sequence[dict[str, Any]], verdicts: dict[str, str]) -> dict[str, Any]:
    """The groundedness figures of ``run_eval`` for these rows given these verdicts."""
    return summarise_groundedness([{**r, "verdict": verdicts[r["id"]]} for r in rows])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=("default", "small"), default="small")
    parser.add_argument("--limit", type=int, default=None, help="first N pairs of each set")
    parser.add_argument(
        "--set",
        action="append",
        dest="sets",
        help="pairs file in benchmarks/eval, repeatable (of a set with splits, its train "
        f"split only; default: {' and '.join(DEFAULT_SETS)})",
    )
    parser.add_argument("--readings", type=Path, default=None, help="reuse a calibration file")
    parser.add_argument("--engine-url", help="read the prompts with this engine's model")
    parser.add_argument("--engine-chat-model", help="the engine's model id (default: its only one)")
    parser.add_argument("--engine-api-key", help="bearer key for the engine")
    parser.add_argument("--judge-model", help="read the prompts with this local model")
    args = parser.parse_args(argv)
    if args.readings:
        earlier = json.loads(args.readings.read_text(encoding="utf-8"))
        reader, rows = earlier["reader"], earlier["pairs"]
    else:
        engine = None
        if args.engine_url:
            engine = {
                "engine_url": args.engine_url,
                "chat_model": args.engine_chat_model,
                "engine_api_key": args.engine_api_key,
            }
        reader, judge = make_judge(args.profile, engine, args.judge_model)
        cases = calibration_cases(args.sets or DEFAULT_SETS, args.limit)
        rows = collect_readings(judge, cases)
    own = reader.startswith(("engine-", "judge-"))
    name = reader if own else f"{args.profile}-{reader}"
    out = EVAL_DIR / f"calibration-{name}.json"
    figures = report(rows)
    result = {"profile": args.profile, "reader": reader, **figures, "pairs": rows}
    out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=1))
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
