"""Same request, same answer: a probe set read on a fresh backend, then again after a long
mixed workload on the same backend and again among concurrent requests, compared bit for bit.

python -m benchmarks.determinism [--profile small] [--requests 500] [--deterministic]
python -m benchmarks.determinism --engine transformers --dummy --settings default deterministic

The workload mixes what a long-running server sees: short greedy and sampled answers, streams
closed after a few chunks, tool calls, JSON mode and ``response_format`` schemas, groundedness
checks on a long context, and long prompts (llama.cpp runs with a 2,048-token cache, so several
together set requests aside and resume them). Eight client threads send it. The probes are
greedy answers with their top log-probabilities and groundedness checks with their support.
Then the probes among eight clients sending requests all along, and seeded answers at
temperature 0.7 alone and among eight. Tokens per second at 1 and 8 streams and the judge's
time per check are measured for each setting: ``default`` (batching) and ``deterministic``
(each request alone, ``CORE_DETERMINISTIC``), each on a fresh engine.

``--engine transformers`` runs the transformers engine (bf16; on a GPU its CUDA-graph slot
runner, ``CORE_CUDA_GRAPHS``), ``--dummy`` on the profile's architecture with random weights
(``benchmarks.dummy_models``: a GPU machine without the weights; answers mean nothing, their
sameness does), ``--tiny`` on a 2-layer one with few requests (a dry run on a CPU). The figures
print as a table and go to ``--out`` (default ``$OUT/determinism.json`` when ``OUT`` is set)
after each part.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.determinism_engines import (
    ReplayEngines,
    Results,
    default_out,
    runner_counts,
    runner_name,
)
from benchmarks.determinism_requests import (
    Beside,
    noise,
    probe_checks,
    probe_requests,
    read_probes,
    replay,
    seeded_answers,
    tokens_per_second,
    workload,
)

logger = logging.getLogger(__name__)

__all__ = ["main", "probe_checks", "probe_requests", "read_probes", "replay", "workload"]


def largest_differences(before: list[Any], after: list[Any], answers: int) -> tuple[float, float]:
    """The largest log-probability difference between two readings of an answer (its chosen
    tokens' and their alternatives', up to where the tokens part), and of a check's support."""
    logprob = 0.0
    for (_, a), (_, b) in zip(before[:answers], after[:answers], strict=True):
        for (token, lp, top), (token_b, lp_b, top_b) in zip(a, b, strict=False):
            if token != token_b:
                break
            logprob = max(logprob, abs(lp - lp_b))
            other = dict(top_b)
            logprob = max([logprob] + [abs(v - other[t]) for t, v in top if t in other])
    support = max(
        (abs(a[1] - b[1]) for a, b in zip(before[answers:], after[answers:], strict=True)),
        default=0.0,
    )
    return logprob, support


def compare(before: list[Any], after: list[Any], answers: int, label: str) -> dict[str, Any]:
    """How many of the first ``answers`` readings (answers) and of the rest (checks) are
    bitwise the same; printed and returned."""
    same = [a == b for a, b in zip(before, after, strict=True)]
    logprob, support = largest_differences(before, after, answers)
    result = {
        "answers_identical": sum(same[:answers]),
        "answers": answers,
        "same_text": sum(
            a[0] == b[0] for a, b in zip(before[:answers], after[:answers], strict=True)
        ),
        "checks_identical": sum(same[answers:]),
        "checks": len(same) - answers,
        "largest_logprob_difference": logprob,
        "largest_support_difference": support,
    }
    print(
        f"{label}: {result['answers_identical']}/{answers} answers "
        f"({result['same_text']} the same text) and {result['checks_identical']}/"
        f"{result['checks']} checks bitwise identical; largest differences: logprob "
        f"{logprob:.3g}, support {support:.3g}",
        flush=True,
    )
    for i, (a, b) in enumerate(zip(before, after, strict=True)):
        if a != b and i >= answers:
            print(f"  check {i - answers}: {a} -> {b}")
    return result


def measure(backend, engine, args: argparse.Namespace, record) -> None:
    """One setting's parts on a fresh backend, each ``record``-ed as it is measured."""
    requests = probe_requests(args.probes, args.probe_tokens)
    checks = probe_checks(args.checks)
    answers = len(requests)
    started = time.perf_counter()
    fresh = read_probes(backend, requests, checks)
    record("fresh_probes_s", round(time.perf_counter() - started, 2))
    started = time.perf_counter()
    failed = replay(backend, workload(args.requests), args.threads, tolerate=True)
    took = time.perf_counter() - started
    counts = runner_counts(engine)
    print(f"workload: {args.requests} requests in {took:.0f} s, failed {dict(failed)}, {counts}")
    record("workload", {"requests": args.requests, "s": round(took, 1), "failed": failed, **counts})
    after = read_probes(backend, requests, checks)
    record("after_workload", compare(fresh, after, answers, "after the workload"))
    with Beside(backend, noise(), args.threads) as beside:
        among = read_probes(backend, requests, checks)
    label = f"among {args.threads} clients ({beside.sent} requests beside)"
    record("among_concurrent", compare(fresh, among, answers, label))
    alone = seeded_answers(backend, 0, args.seeded_rounds)
    record("seeded_alone", alone.count(alone[0]))
    print(f"seeded at 0.7, alone: {alone.count(alone[0])}/{args.seeded_rounds} identical")
    among_seeded = seeded_answers(backend, args.threads, args.seeded_rounds)
    record("seeded_among", among_seeded.count(alone[0]))
    print(
        f"seeded at 0.7, among {args.threads}: {among_seeded.count(alone[0])}/"
        f"{args.seeded_rounds} identical to alone",
        flush=True,
    )
    rates = {}
    for streams in (1, args.threads):
        rates[streams] = round(tokens_per_second(backend, streams, args.stream_tokens), 1)
        print(f"tokens/s, {streams} at once: {rates[streams]}", flush=True)
        record("tokens_per_s", rates)
    started = time.perf_counter()
    for context, response in checks:
        backend.check_groundedness(context, response)
    per_check = (time.perf_counter() - started) / max(len(checks), 1)
    record("judge_s_per_check", round(per_check, 3))
    print(f"judge: {per_check:.3f} s per short check", flush=True)


def summary_rows(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """The table's rows: what each setting's figures read as."""

    def identical(part: str):
        return lambda f: (
            f"{f[part]['answers_identical']}/{f[part]['answers']}, "
            f"{f[part]['checks_identical']}/{f[part]['checks']}"
        )

    n, t = args.seeded_rounds, args.threads
    return [
        ("runner", lambda f: f["runner"]),
        ("stopped by", lambda f: f.get("error", "")[:40]),
        ("workload: requests, s", lambda f: f"{f['workload']['requests']}, {f['workload']['s']}"),
        ("workload: failed", lambda f: str(sum(f["workload"]["failed"].values()))),
        ("after workload: answers, checks", identical("after_workload")),
        (f"among {t}: answers, checks", identical("among_concurrent")),
        (
            "among: largest logprob diff",
            lambda f: f"{f['among_concurrent']['largest_logprob_difference']:.3g}",
        ),
        (f"seeded 0.7 alone (of {n})", lambda f: str(f["seeded_alone"])),
        (f"seeded among {t} = alone (of {n})", lambda f: str(f["seeded_among"])),
        ("tokens/s, 1 stream", lambda f: str(f["tokens_per_s"][1])),
        (f"tokens/s, {t} streams", lambda f: str(f["tokens_per_s"][t])),
        ("judge, s per check", lambda f: str(f["judge_s_per_check"])),
    ]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["llama.cpp", "transformers"])
    parser.add_argument("--dummy", action="store_true", help="random weights (transformers)")
    parser.add_argument("--tiny", action="store_true", help="a dry run: 2 layers, few requests")
    parser.add_argument("--profile", choices=["default", "small"])
    parser.add_argument("--settings", nargs="+", choices=["default", "deterministic"])
    parser.add_argument("--deterministic", action="store_true", help="--settings deterministic")
    parser.add_argument("--requests", type=int)
    parser.add_argument("--probes", type=int, help="greedy answers read (20)")
    parser.add_argument("--checks", type=int, help="groundedness checks read (20)")
    parser.add_argument("--probe-tokens", type=int, help="each probe's new tokens (16)")
    parser.add_argument("--seeded-rounds", type=int, help="seeded answers each way (20)")
    parser.add_argument("--stream-tokens", type=int, help="tokens a stream in tokens/s (64)")
    parser.add_argument("--threads", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--out", type=Path, default=default_out(), help="JSON ($OUT/...)")
    args = parser.parse_args(argv)
    args.dummy = args.dummy or args.tiny
    args.engine = args.engine or ("transformers" if args.dummy else "llama.cpp")
    if args.dummy and args.engine != "transformers":
        parser.error("random weights (--dummy, --tiny) run on the transformers engine")
    # Random weights build the kit's architecture: the default profile's.
    args.profile = args.profile or ("default" if args.dummy else "small")
    args.settings = args.settings or ["deterministic" if args.deterministic else "default"]
    sizes = (12, 4, 2, 8, 3, 8) if args.tiny else (500, 20, 20, 16, 20, 64)
    names = ("requests", "probes", "checks", "probe_tokens", "seeded_rounds", "stream_tokens")
    for name, size in zip(names, sizes, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, size)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING)
    from backend.backends.local import InProcessBackend

    began = time.perf_counter()
    with ReplayEngines(args.engine, args.profile, args.dummy, args.tiny) as engines:
        about = {
            "engine": args.engine,
            "model": engines.label,
            "environment": {k: v for k, v in os.environ.items() if k.startswith("CORE_")},
            "options": vars(args) | {"out": str(args.out)},
        }
        results = Results(args.out, about)
        print(f"{engines.label} (built in {time.perf_counter() - began:.1f} s)", flush=True)
        for setting in args.settings:
            started = time.perf_counter()
            engine = engines.load(setting == "deterministic")
            backend = InProcessBackend(profile=args.profile, chat_engine_instance=engine)
            took = time.perf_counter() - started
            print(f"\n{setting}: {runner_name(engine)}, ready in {took:.1f} s", flush=True)
            results.record(setting, "runner", runner_name(engine))
            try:
                measure(
                    backend,
                    engine,
                    args,
                    lambda part, value, s=setting: results.record(s, part, value),
                )
            except Exception as error:  # the next setting still runs; the table says so
                logger.exception("the %s setting stopped", setting)
                results.record(setting, "error", repr(error))
            finally:
                backend.close()
                engine.close()
    print()
    print(results.table(summary_rows(args)))
    if args.out is not None:
        print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
