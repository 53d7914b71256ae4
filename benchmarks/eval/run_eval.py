"""Quality evaluation of a profile through the public ``Backend`` interface.

    .venv/bin/python -m benchmarks.eval.run_eval --profile small

Runs the groundedness (the first set, and the second set's test split, which no calibration
reads), tool-call (one call, several calls in one reply, optional arguments), retrieval and
extraction sets of this folder against an ``InProcessBackend`` for the profile, prints a
table and writes ``results-<profile>.json`` (figures and every case's outcome).
``--sections``, ``--extraction-modes`` and ``--limit`` run part of it (``--update`` keeps the
other sections of the file); ``CORE_CHAT_ENGINE`` picks the chat engine as it does for the
service.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from backend.groundedness.request import groundedness_request, read_verdict
from backend.protocol.catalogue import DEFAULT_CHAT_MODEL, PASSAGE_MODEL, QUERY_MODEL
from benchmarks.eval import metrics
from benchmarks.eval.extraction import MODES as EXTRACTION_MODES
from benchmarks.eval.extraction import evaluate_extraction
from benchmarks.eval.metrics import GROUNDED, NOT_GROUNDED, NOT_SURE
from benchmarks.eval.optional_arguments import OPTIONAL_SETS, evaluate_optional_arguments
from benchmarks.machine import cpu_name

EVAL_DIR = Path(__file__).resolve().parent
SECTIONS = (
    "groundedness",
    "groundedness_heldout",
    "wice_dev",
    "kornli_dev",
    "jnli_dev",
    "tools",
    "parallel",
    "optional",
    "retrieval",
    "extraction",
    "extraction_heldout",
)
#: The groundedness sets: the first, and the second set's test split, which no calibration
#: reads (``calibrate.calibration_cases``): the figure for pairs the judge was never tuned on.
GROUNDEDNESS_SETS = {
    "groundedness": ("groundedness.jsonl", None),
    "groundedness_heldout": ("groundedness_v2.jsonl", "test"),
}
#: Public dev sets from ../shared/data/nli, drawn as ``benchmarks.judge.datasets`` draws them
#: (never trained on): WiCE dev as LLM-AggreFact builds its WiCE subset (only ``supported``
#: is grounded: partially supported claims count as not grounded, their share by category),
#: KorNLI dev and JNLI valid as binary (entailment against the rest).
PUBLIC_SETS = {"wice_dev": "wice-dev", "kornli_dev": "kornli-dev", "jnli_dev": "jnli-valid"}


def groundedness_cases(section: str, limit: int | None) -> list[dict[str, Any]]:
    """The pairs of a groundedness section, in ``evaluate_groundedness``'s shape."""
    if section in GROUNDEDNESS_SETS:
        name, split = GROUNDEDNESS_SETS[section]
        return [c for c in load_jsonl(name) if split in (None, c.get("split"))][:limit]
    from benchmarks.judge.datasets import MEASURING

    return [
        {
            "id": case.id,
            "context": case.document,
            "response": case.claim,
            "label": GROUNDED if case.label else NOT_GROUNDED,
            "clear": True,
            "language": case.language,
            "category": case.category,
            "long_context": len(case.document) > 3000,
        }
        for case in MEASURING[PUBLIC_SETS[section]]()[:limit]
    ]


#: The extraction sections and their sets (the held-out set is never used to tune anything).
EXTRACTION_SETS = {
    "extraction": "extraction.jsonl",
    "extraction_heldout": "extraction_heldout.jsonl",
}
#: The sets of prompts needing several tool calls, each with a held-out twin never tuned on.
PARALLEL_SETS = {
    "parallel": "parallel_calls.jsonl",
    "parallel_heldout": "parallel_calls_heldout.jsonl",
    # three to six calls a prompt, many tools offered: one call per item (``many``) and per
    # item and thing asked (``combined``, "the status and the judge of two cases")
    "parallel_many": "parallel_calls_many.jsonl",
    "parallel_many_heldout": "parallel_calls_many_heldout.jsonl",
    "parallel_combined": "parallel_calls_combined.jsonl",
    "parallel_combined_heldout": "parallel_calls_combined_heldout.jsonl",
    # lists of numbers typed without a space after the comma ("3,8 and 11"), beside numbers
    # with thousands separators ("$5,000") that must stay whole
    "parallel_numbers": "parallel_calls_numbers.jsonl",
    "parallel_numbers_heldout": "parallel_calls_numbers_heldout.jsonl",
}
TOOL_MAX_TOKENS = 160
PARALLEL_MAX_TOKENS = 320
EMBED_BATCH = 32


def load_jsonl(name: str) -> list[dict[str, Any]]:
    with open(EVAL_DIR / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_tools() -> dict[str, dict[str, Any]]:
    """The tool definitions by function name (OpenAI ``{"type": "function", ...}`` shape)."""
    with open(EVAL_DIR / "tools.json", encoding="utf-8") as f:
        return {tool["function"]["name"]: tool for tool in json.load(f)}


# ------------------------------------------------------------------ groundedness


def evaluate_groundedness(backend: Any, cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One check per case; balanced accuracy over the clear grounded/notGrounded cases."""
    rows = []
    for case in tqdm(cases, desc="groundedness", unit="pair"):
        started = time.perf_counter()
        reply = backend.chat(groundedness_request(case["context"], case["response"]))
        rows.append(
            {
                "id": case["id"],
                "label": case["label"],
                "verdict": read_verdict(reply),
                "seconds": time.perf_counter() - started,
                "prompt_tokens": reply.usage.prompt_tokens,
                "language": case["language"],
                "category": case["category"],
                "long_context": case["long_context"],
                "clear": case["clear"],
            }
        )
    return {"summary": summarise_groundedness(rows), "cases": rows}


def summarise_groundedness(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def accuracy(selected: Sequence[dict[str, Any]]) -> float:
        labelled = [r for r in selected if r["label"] in (GROUNDED, NOT_GROUNDED)]
        return metrics.balanced_accuracy(
            [r["label"] for r in labelled], [r["verdict"] for r in labelled]
        )

    clear = [r for r in rows if r["clear"]]
    ambiguous = [r for r in rows if not r["clear"]]
    long_rows = [r for r in rows if r["long_context"]]
    short_rows = [r for r in rows if not r["long_context"]]
    return {
        "cases": len(rows),
        "balanced_accuracy": accuracy(clear),
        "balanced_accuracy_by_language": {
            lang: accuracy([r for r in clear if r["language"] == lang])
            for lang in sorted({r["language"] for r in clear})
        },
        "balanced_accuracy_long_context": accuracy([r for r in clear if r["long_context"]]),
        "accuracy_by_category": {
            cat: metrics.mean(
                [float(r["verdict"] == r["label"]) for r in clear if r["category"] == cat]
            )
            for cat in sorted({r["category"] for r in clear})
        },
        "not_sure_rate_clear": metrics.rate([r["verdict"] for r in clear], NOT_SURE),
        "not_sure_rate_ambiguous": metrics.rate([r["verdict"] for r in ambiguous], NOT_SURE),
        "seconds_per_check": metrics.mean([r["seconds"] for r in rows]),
        "seconds_per_check_short": metrics.mean([r["seconds"] for r in short_rows]),
        "seconds_per_check_long": metrics.mean([r["seconds"] for r in long_rows]),
        "prompt_tokens_per_check_long": metrics.mean([r["prompt_tokens"] for r in long_rows]),
    }


# ------------------------------------------------------------------ tool calls

_CALL_SHAPE = re.compile(r"<tool_call>|\"name\"\s*:\s*\"(?P<name>[^\"]+)\"")


def unparsed_call_in(content: str | None, tool_names: Sequence[str]) -> bool:
    """Whether text left as content still looks like a tool call the parser missed."""
    for match in _CALL_SHAPE.finditer(content or ""):
        if match.group("name") is None or match.group("name") in tool_names:
            return True
    return False


def _ask_with_tools(
    backend: Any,
    case: dict[str, Any],
    tools: dict[str, dict[str, Any]],
    max_tokens: int,
    **fields: Any,
) -> tuple[list[tuple[str, str]], str | None, float]:
    """One greedy request with the case's tools offered: its calls (name, arguments), its
    content and the seconds it took."""
    started = time.perf_counter()
    reply = backend.chat(
        {
            "model": DEFAULT_CHAT_MODEL,
            "messages": [{"role": "user", "content": case["prompt"]}],
            "tools": [tools[name] for name in case["tools"]],
            "temperature": 0,
            "max_tokens": max_tokens,
            **fields,
        }
    )
    message = reply.choices[0].message
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    return calls, message.content, time.perf_counter() - started


def _named_calls(calls: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "arguments": arguments} for name, arguments in calls]


def _tool_case_row(
    case: dict[str, Any],
    calls: list[tuple[str, str]],
    content: str | None,
    seconds: float,
    /,
    **more,
) -> dict[str, Any]:
    """A tool-calling case as the report lists it: the case, the calls and text the model
    answered with, the time it took, then ``more`` (its judged outcome...)."""
    return {
        "id": case["id"],
        "language": case["language"],
        "expected": case["expected"],
        "calls": _named_calls(calls),
        "content": content,
        "seconds": seconds,
        **more,
    }


def evaluate_tools(
    backend: Any, cases: Sequence[dict[str, Any]], tools: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """One greedy chat request per case with its tools offered (tool_choice auto)."""
    functions = {name: tool["function"] for name, tool in tools.items()}
    outcomes, rows = [], []
    for case in tqdm(cases, desc="tool calls", unit="case"):
        calls, content, seconds = _ask_with_tools(backend, case, tools, TOOL_MAX_TOKENS)
        outcome = metrics.judge_tool_case(case["expected"], calls, functions)
        if unparsed_call_in(content, case["tools"]):
            outcome = dataclasses.replace(outcome, parsed=False)
        outcomes.append(outcome)
        rows.append(_tool_case_row(case, calls, content, seconds, **outcome.__dict__))
    summary = metrics.summarise_tool_outcomes(outcomes)
    summary["seconds_per_case"] = metrics.mean([r["seconds"] for r in rows])
    return {"summary": summary, "cases": rows}


# ------------------------------------------------------------------ parallel tool calls


def evaluate_parallel_calls(
    backend: Any, cases: Sequence[dict[str, Any]], tools: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Two greedy requests per case needing several calls: with parallel calls (the default),
    and with ``parallel_tool_calls: false``."""
    functions = {name: tool["function"] for name, tool in tools.items()}
    outcomes, single_counts, rows = [], [], []
    for case in tqdm(cases, desc="parallel calls", unit="case"):
        replies = {
            parallel: _ask_with_tools(
                backend, case, tools, PARALLEL_MAX_TOKENS, parallel_tool_calls=parallel
            )
            for parallel in (True, False)
        }
        calls, content, seconds = replies[True]
        outcome = metrics.judge_parallel_case(case["expected"], calls, functions)
        outcomes.append(outcome)
        single_counts.append(len(replies[False][0]))
        rows.append(
            _tool_case_row(
                case,
                calls,
                content,
                seconds,
                calls_when_not_parallel=_named_calls(replies[False][0]),
                **outcome.__dict__,
            )
        )
    summary = metrics.summarise_parallel_outcomes(outcomes, single_counts)
    summary["seconds_per_case"] = metrics.mean([r["seconds"] for r in rows])
    return {"summary": summary, "cases": rows}


# ------------------------------------------------------------------ retrieval


def _embed(backend: Any, model: str, texts: Sequence[str]) -> np.ndarray:
    vectors = []
    for start in range(0, len(texts), EMBED_BATCH):
        reply = backend.embed({"model": model, "input": list(texts[start : start + EMBED_BATCH])})
        vectors.extend(item.embedding for item in reply.data)
    matrix = np.asarray(vectors, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def evaluate_retrieval(
    backend: Any, corpus: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Rank the whole corpus for each query by cosine similarity of query and passage vectors."""
    started = time.perf_counter()
    passages = _embed(backend, PASSAGE_MODEL, [p["text"] for p in corpus])
    asked = _embed(backend, QUERY_MODEL, [q["query"] for q in queries])
    ids = [p["id"] for p in corpus]
    rows = []
    for query, scores in zip(queries, asked @ passages.T, strict=True):
        ranked = [ids[i] for i in np.argsort(-scores)]
        rows.append(
            {
                "id": query["id"],
                "language": query["language"],
                "gold": query["gold"],
                "top3": ranked[:3],
                "rank": metrics.first_gold_rank(ranked, query["gold"]),
            }
        )
    ranks = [r["rank"] for r in rows]
    summary = {
        "queries": len(rows),
        "passages": len(corpus),
        "recall_at_1": metrics.recall_at_1(ranks),
        "mrr": metrics.mean_reciprocal_rank(ranks),
        "recall_at_1_by_language": {
            lang: metrics.recall_at_1([r["rank"] for r in rows if r["language"] == lang])
            for lang in sorted({r["language"] for r in rows})
        },
        "seconds": time.perf_counter() - started,
    }
    return {"summary": summary, "cases": rows}


# ------------------------------------------------------------------ report


def _figure(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if value != value else f"{value:.3f}"
    return str(value)


def format_table(results: dict[str, Any]) -> str:
    """The headline figures of one profile as a plain-text table."""
    lines = [
        f"profile {results['profile']} (chat engine {results['chat_engine']}, groundedness "
        f"read by {results.get('groundedness_engine', 'chat')})"
    ]
    picks: dict[str, Sequence[str]] = {
        **{
            section: (
                "cases",
                "balanced_accuracy",
                "balanced_accuracy_long_context",
                "not_sure_rate_clear",
                "not_sure_rate_ambiguous",
                "seconds_per_check_short",
                "seconds_per_check_long",
            )
            for section in (*GROUNDEDNESS_SETS, *PUBLIC_SETS)
        },
        "tools": (
            "cases",
            "parse_rate",
            "schema_valid_rate",
            "right_function",
            "right_arguments",
            "false_call_rate",
            "seconds_per_case",
        ),
        **{
            name: ("cases", "all_calls", "right_functions", "one_call_when_not_parallel")
            for name in PARALLEL_SETS
        },
        **{
            name: ("cases", "right", "expected_calls", "unstated_value_rate")
            for name in OPTIONAL_SETS
        },
        "retrieval": ("queries", "passages", "recall_at_1", "mrr"),
    }
    for section, keys in picks.items():
        if section not in results:
            continue
        summary = results[section]["summary"]
        for key in keys:
            lines.append(f"  {section:<25} {key:<32} {_figure(summary[key]):>8}")
    extraction_keys = ("cases", "parse_rate", "schema_valid_rate", "field_accuracy")
    for section in EXTRACTION_SETS:
        for mode, result in results.get(section, {}).items():
            summary = result["summary"]
            for key in extraction_keys:
                lines.append(f"  {section:<18} {mode:<11} {key:<20} {_figure(summary[key]):>8}")
            for lang, value in summary["field_accuracy_by_language"].items():
                lines.append(f"  {section:<18} {mode:<11} {'... ' + lang:<20} {_figure(value):>8}")
    return "\n".join(lines)


def _log_extraction_row(mode: str, row: dict[str, Any]) -> None:
    print(
        f"  {row['id']} {mode}: parsed {row['parsed']}, valid {row['valid']}, "
        f"{row['right']}/{row['fields']} fields, {row['completion_tokens']} tokens "
        f"({row['finish_reason']}), {row['seconds']:.1f} s",
        file=sys.stderr,
        flush=True,
    )


def run(
    profile: str,
    sections: Sequence[str] = SECTIONS,
    limit: int | None = None,
    log: Callable[[str], None] = print,
    extraction_modes: Sequence[str] = EXTRACTION_MODES,
    extraction_workers: int = 1,
) -> dict[str, Any]:
    from backend.backends.local import InProcessBackend
    from backend.engines.selection import chat_engine_kind

    backend = InProcessBackend(profile=profile)
    config = backend.config
    results: dict[str, Any] = {
        "profile": profile,
        "chat_model": config.chat_model,
        "chat_engine": chat_engine_kind(config.chat_model, config.chat_engine, config.device),
        "groundedness_engine": None,  # filled in once the judge's reader is loaded
        "grounded_at": None,  # filled in once the judge's reader is loaded
        "not_grounded_below": None,
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    try:
        for section in (*GROUNDEDNESS_SETS, *PUBLIC_SETS):
            if section not in sections:
                continue
            cases = groundedness_cases(section, limit)
            log(f"{section}: {len(cases)} pairs")
            results[section] = evaluate_groundedness(backend, cases)
        if (GROUNDEDNESS_SETS.keys() | PUBLIC_SETS.keys()) & set(sections):
            calibration = backend.judge_calibration()
            results["groundedness_engine"] = backend.judge_reader().kind
            results["grounded_at"] = calibration.grounded_at
            results["not_grounded_below"] = calibration.not_grounded_below
            results["questions"] = list(calibration.questions)
        if "tools" in sections:
            cases = load_jsonl("tool_calls.jsonl")[:limit]
            log(f"tool calls: {len(cases)} cases")
            results["tools"] = evaluate_tools(backend, cases, load_tools())
        if "parallel" in sections:
            for name, file in PARALLEL_SETS.items():
                cases = load_jsonl(file)[:limit]
                log(f"{name}: {len(cases)} cases")
                results[name] = evaluate_parallel_calls(backend, cases, load_tools())
        if "optional" in sections:
            tools = load_tools()
            ask = functools.partial(
                _ask_with_tools, backend, tools=tools, max_tokens=PARALLEL_MAX_TOKENS
            )
            for name, file in OPTIONAL_SETS.items():
                cases = load_jsonl(file)[:limit]
                log(f"{name}: {len(cases)} cases")
                results[name] = evaluate_optional_arguments(ask, cases, tools)
        if "retrieval" in sections:
            log("retrieval")
            results["retrieval"] = evaluate_retrieval(
                backend, load_jsonl("retrieval_corpus.jsonl"), load_jsonl("retrieval_queries.jsonl")
            )
        for section, name in EXTRACTION_SETS.items():
            if section in sections:
                cases = load_jsonl(name)[:limit]
                log(f"{section}: {len(cases)} cases, modes {', '.join(extraction_modes)}")
                results[section] = evaluate_extraction(
                    backend, cases, extraction_modes, extraction_workers, _log_extraction_row
                )
    finally:
        backend.close()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=("default", "small"), default="small")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument(
        "--extraction-modes", nargs="+", choices=EXTRACTION_MODES, default=list(EXTRACTION_MODES)
    )
    parser.add_argument(
        "--extraction-workers", type=int, default=1, help="extraction requests sent at once"
    )
    parser.add_argument("--limit", type=int, default=None, help="first N cases of each set")
    parser.add_argument("--out", type=Path, default=None, help="default: results-<profile>.json")
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the sections of --out that were not run (section_dates says when each ran)",
    )
    args = parser.parse_args(argv)
    results = run(
        args.profile,
        args.sections,
        args.limit,
        extraction_modes=args.extraction_modes,
        extraction_workers=args.extraction_workers,
    )
    out = args.out or EVAL_DIR / f"results-{args.profile}.json"
    results["section_dates"] = {s: results["date"] for s in SECTIONS if s in results}
    if args.update and out.exists():
        earlier = json.loads(out.read_text(encoding="utf-8"))
        dates = {s: earlier["date"] for s in SECTIONS if s in earlier}
        dates.update(earlier.get("section_dates", {}), **results["section_dates"])
        results = {**earlier, **results, "section_dates": dates}
    out.write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(format_table(results))
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
