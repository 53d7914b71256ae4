"""The plots of the "Today's figures" page, drawn from ``benchmarks/results.json`` (what
``make bench`` last wrote) into ``docs/img/benchmarks/``, where they are committed:
``python docs/_hooks/benchmark_plots.py`` after a new ``make bench`` (needs matplotlib, which
the ``notebooks`` extra brings)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "img" / "benchmarks"
#: Units where a smaller figure is better (times, memory).
LOWER_IS_BETTER = {"s", "s/check", "MiB"}


def speed_ratios(results: list[dict]) -> None:
    rows = [r for r in results if r.get("ratio") is not None]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.2), dpi=90)
    names = [r["name"] for r in rows]
    ratios = [r["ratio"] for r in rows]
    colours = ["#c77c0e" if r["unit"] in LOWER_IS_BETTER else "#3f51b5" for r in rows]
    ax.barh(names, ratios, color=colours)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(min(ratios) / 1.5, max(ratios) * 5)  # room for the labels
    ax.invert_yaxis()
    ax.set_xlabel("ours / baseline (log scale); blue: higher is better, orange: lower is better")
    for y, r in enumerate(rows):
        ax.text(r["ratio"], y, f" {r['ratio']:.2f} (goal {r['goal']})", va="center", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "speed-ratios.png")
    plt.close(fig)


def transformers_streams(results: list[dict]) -> None:
    by_name = {r["name"]: r for r in results}
    streams = [n for n in (1, 4, 16, 64) if f"transformers_streams_{n}_vs_hf_generate" in by_name]
    if not streams:
        return
    ours = [by_name[f"transformers_streams_{n}_vs_hf_generate"]["ours"] for n in streams]
    generate = [by_name[f"transformers_streams_{n}_vs_hf_generate"]["baseline"] for n in streams]
    alone = [by_name[f"transformers_streams_{n}_vs_one_at_a_time"]["baseline"] for n in streams]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=90)
    ax.plot(streams, ours, marker="o", label="batching runner (ours)")
    ax.plot(streams, generate, marker="s", label="transformers generate, one batch")
    ax.plot(streams, alone, marker="^", label="one request at a time")
    ax.set_xscale("log", base=2)
    ax.set_xticks(streams, [str(n) for n in streams])
    ax.set_xlabel("concurrent greedy streams")
    ax.set_ylabel("tokens/s (all streams)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(OUT / "transformers-streams.png")
    plt.close(fig)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text(encoding="utf-8"))
    speed_ratios(results)
    transformers_streams(results)


if __name__ == "__main__":
    main()
