"""Embedding rows on Ray Data (``backend.bulk.ray_data.embed_dataset``) against ``BulkRunner`` in
one process, on the same texts in the same run.

python -m benchmarks.ray_data [--profile small|default] [--rows 1000] [--repeats 3]

Each run is timed from nothing loaded to every vector back, as a user waits for it: the
baseline is ``BulkRunner(backend.connect(...)).embed(texts)`` (which loads the embedding
model on its first request), and each Ray Data variant starts its actors, which load the
model, embed and return the rows to the driver. One untimed baseline run first imports torch
here and puts the weights in the page cache; the local Ray is started once, with every CPU.
Variants run in rotation and the medians are reported.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
from collections.abc import Callable

import backend
from backend.bulk import BulkRunner
from benchmarks.machine import cpu_name
from benchmarks.measure import Figure, print_table, timed
from benchmarks.texts import mixed_texts

#: Ray Data variants: (name, map options). The default pool is one actor with one CPU; the
#: others give the actors every CPU, as one actor or as one actor per CPU.
VARIANTS: tuple[tuple[str, dict], ...] = (
    ("default_pool", {}),
    ("one_actor_all_cpus", {"concurrency": 1, "num_cpus": "all"}),
    ("actor_per_cpu", {"concurrency": "all", "num_cpus": 1}),
)


def ray_data_vs_bulk_runner(profile: str, rows: int, repeats: int) -> list[Figure]:
    """texts/s of ``embed_dataset`` in each variant against ``BulkRunner`` (the baseline)."""
    import ray

    from backend.bulk.ray_data import ActorPool, embed_dataset

    cpus = os.cpu_count() or 1
    texts = mixed_texts(rows)
    items = [{"id": i, "text": text} for i, text in enumerate(texts)]

    def bulk_runner(threads: int | None = None) -> Callable[[], None]:
        def run() -> None:
            import torch

            default = torch.get_num_threads()
            torch.set_num_threads(threads or default)
            try:
                with backend.connect(profile=profile) as service:
                    vectors = BulkRunner(service, progress=False).embed(texts)
            finally:
                torch.set_num_threads(default)
            assert vectors.shape[0] == rows

        return run

    def ray_variant(options: dict) -> Callable[[], None]:
        options = {key: cpus if value == "all" else value for key, value in options.items()}

        def run() -> None:
            pool = ActorPool(**options)
            dataset = embed_dataset(ray.data.from_items(items), pool=pool, profile=profile)
            done = dataset.take_all()
            assert len(done) == rows and not any(row["error"] for row in done)

        return run

    runs = {"bulk_runner": bulk_runner(), "bulk_runner_one_thread": bulk_runner(threads=1)}
    runs |= {name: ray_variant(options) for name, options in VARIANTS}
    names = list(runs)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    # Warm-up: torch imported here, the weights converted and in the page cache for all.
    runs["bulk_runner"]()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        for repeat in range(repeats):
            shift = repeat % len(names)  # rotate which goes first
            for name in names[shift:] + names[:shift]:
                seconds[name].append(timed(runs[name]))
    finally:
        ray.shutdown()

    def rate(name: str) -> float:
        return rows / statistics.median(seconds[name])

    note = f"{rows} texts of 10-250 words; both timed from nothing loaded (model load included)"
    figures = [
        Figure(
            f"ray_embed_{name}_vs_bulkrunner",
            "texts/s",
            rate("bulk_runner"),
            rate(name),
            goal="report",
            note=f"{note}; {_describe(options, cpus)}; BulkRunner with torch's default threads",
        )
        for name, options in VARIANTS
    ]
    # The default pool's actor runs torch on one thread (Ray sets OMP_NUM_THREADS to its
    # CPUs): against BulkRunner on one thread too, the ratio is what Ray itself costs.
    figures.append(
        Figure(
            "ray_embed_default_pool_vs_bulkrunner_one_thread",
            "texts/s",
            rate("bulk_runner_one_thread"),
            rate("default_pool"),
            goal="report",
            note=f"{note}; both on one torch thread",
        )
    )
    return figures


def _describe(options: dict, cpus: int) -> str:
    if not options:
        return "default pool (1 actor, 1 CPU)"
    actors = cpus if options["concurrency"] == "all" else options["concurrency"]
    each = cpus if options["num_cpus"] == "all" else options["num_cpus"]
    return f"{actors} actor(s) x {each} CPU(s) on a {cpus}-CPU local Ray"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["default", "small"], default="small")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="repetitions per variant (median)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    print(
        f"Ray Data vs BulkRunner: profile {args.profile}, {args.rows} rows, "
        f"{os.cpu_count()} CPUs, {cpu_name()}, {args.repeats} repetitions, medians\n",
        flush=True,
    )
    print_table(ray_data_vs_bulk_runner(args.profile, args.rows, args.repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
