"""``make bench``: every side-by-side figure in one run, printed and written to results.json.

python -m benchmarks.run [--profile default|small] [--repeats 3] [--only name ...]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
from pathlib import Path

from backend.testing.servers import ServerProcess
from benchmarks import (
    chat,
    constrained_json,
    embeddings,
    judge_speed,
    machine,
    serving,
    transformers_batching,
)
from benchmarks.measure import Figure, print_table, write_results

RESULTS = Path(__file__).with_name("results.json")
GROUPS = ["machine", "chat", "constrained", "embeddings", "server", "transformers", "judge"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["default", "small"], default="default")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions per figure (median)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--only",
        nargs="*",
        choices=GROUPS,
        help="run only these groups (default: all); their figures replace those of the same "
        "name in --output, the others stay",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    groups = set(args.only or GROUPS)

    from backend.backends.local import InProcessBackend
    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.engines.weights.embedded_chat import EMBEDDED_CHAT_MODELS

    model_name = PROFILE_CHAT_MODELS[args.profile]
    print(
        f"core-textmodels benchmarks: profile {args.profile} ({model_name}), "
        f"{os.cpu_count()} CPUs, {machine.cpu_name()}, "
        f"{args.repeats} repetitions, medians\n",
        flush=True,
    )
    figures: list[Figure] = []

    def done(*new: Figure) -> None:
        figures.extend(new)
        print_table(list(new))
        print(flush=True)

    if "machine" in groups:
        done(*machine.start_figures(args.profile))
    backend = InProcessBackend(profile=args.profile)
    backend.warmup()
    if "chat" in groups:
        single = chat.single_stream_figures(backend, model_name, args.repeats)
        done(*single)
        if "machine" in groups:
            done(
                machine.bandwidth_figure(
                    machine.memory_read_bandwidth(),
                    EMBEDDED_CHAT_MODELS[model_name].size,
                    single[0].ours,
                )
            )
    if "constrained" in groups:
        done(constrained_json.constrained_vs_unconstrained(backend, model_name, args.repeats))
    if "embeddings" in groups:
        done(embeddings.inprocess_vs_sentence_transformers(args.repeats))
    if "server" in groups:
        # The server's default settings: 16 model places, so 16 clients run at once.
        log = Path(tempfile.gettempdir()) / "core-bench-server.log"  # not the figures' stdout
        with ServerProcess(args.profile, log=log) as server:
            done(embeddings.server_concurrent_vs_sequential(server, args.repeats))
            done(*serving.chat_concurrent_vs_single(server, args.repeats))
            done(serving.chat_ttft_server_vs_inprocess(server, backend, args.repeats))
            done(
                Figure(
                    "server_peak_rss",
                    "MiB",
                    None,
                    server.peak_rss_mib(),
                    "report",
                    "the server process, default settings, after the runs above",
                )
            )
    backend.close()
    if "transformers" in groups:
        # Its own copy of the chat model, on transformers whatever the service would pick here.
        with transformers_batching.loaded(args.profile) as bench:
            for streams in bench.counts:
                done(*bench.stream_figures(streams, args.repeats))
            done(*bench.goal_figures())
            done(*bench.judge_figures(args.repeats))
            if bench.cuda:  # on the CPU the embeddings group measures it
                done(
                    embeddings.inprocess_vs_sentence_transformers(args.repeats, bench.engine.device)
                )

    if "judge" in groups:
        # Each side in processes of its own, after this process has freed its models.
        done(*judge_speed.judge_figures(args.profile, args.repeats))
        print("\n".join(judge_speed.accuracy_lines(args.profile)), end="\n\n", flush=True)

    print("All figures:\n")
    print_table(figures)
    write_results(figures, args.output, keep_others=bool(args.only))
    print(f"\nwritten to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
