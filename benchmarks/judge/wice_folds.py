"""Does in-domain data close the cross-encoder's gap on WiCE? WiCE dev in two folds, by claim.

The long-premise cross-encoder (``cross_encoder train --long``) is trained further on one
half's oracle chunks (WiCE's own evidence chunks: the gold sentences among distractors, about
1.5k characters, the claim's label) and measured on the other half's claims as the judge reads
them (LLM-AggreFact's construction: the evidence sentences joined, label 1 iff ``supported``,
each claim's best of its likeliest chunks, one cut at 0.5). Then the halves swap, so every
claim is measured by a model that never saw it.

    python -m benchmarks.judge.wice_folds --start benchmarks/judge/.features/cross-encoder-long

Writes ``wice-folds.json`` and each fold's rows under ``--out`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path

import numpy as np
import torch

from backend.groundedness.judge import CHUNKS_PER_CLAIM
from benchmarks.judge.cross_encoder import (
    OUT,
    case_supports,
    epochs_plan,
    fit,
    load_trained,
)
from benchmarks.judge.datasets import SEED, SHARED_NLI, Case, _open, wice_dev, wice_evidence

logger = logging.getLogger("wice_folds")


def oracle_chunks() -> dict[str, list[tuple[str, str, str]]]:
    """WiCE dev's oracle chunks by claim id: (chunk text, claim, label)."""
    chunks: dict[str, list[tuple[str, str, str]]] = {}
    with _open(SHARED_NLI / "wice" / "oracle_chunks_claim" / "dev.jsonl.xz") as handle:
        for line in handle:
            row = json.loads(line)
            chunks.setdefault(row["meta"]["id"], []).append(
                (wice_evidence(row["evidence"]), row["claim"], row["label"])
            )
    return chunks


def claim_ids() -> list[str]:
    """WiCE dev's claim ids in file order (``wice_dev()``'s order)."""
    with _open(SHARED_NLI / "wice" / "claim" / "dev.jsonl.xz") as handle:
        return [json.loads(line)["meta"]["id"] for line in handle]


def training_cases(ids: list[str], chunks: dict) -> list[Case]:
    return [
        Case(f"wice-oracle-{claim}-{n}", "wice-oracle", "en", text, said, int(label == "supported"))
        for claim in ids
        for n, (text, said, label) in enumerate(chunks.get(claim, []))
    ]


def run(args: argparse.Namespace) -> None:
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    cases, ids, chunks = wice_dev(), claim_ids(), oracle_chunks()
    order = list(range(len(cases)))
    random.Random(SEED).shuffle(order)
    halves = [sorted(order[: len(order) // 2]), sorted(order[len(order) // 2 :])]
    rows, report = [], {}
    for fold, measured in enumerate(halves):
        trained_on = halves[1 - fold]
        torch.manual_seed(SEED)
        start = argparse.Namespace(**{**vars(args), "out": args.start})
        tokenizer, model = load_trained(start)
        pool = training_cases([ids[i] for i in trained_on], chunks)
        random.Random(SEED).shuffle(pool)
        out = args.out / f"fold-{fold}"
        out.mkdir(parents=True, exist_ok=True)
        logger.info("fold %d: %d oracle chunks from %d claims", fold, len(pool), len(trained_on))
        before = case_supports(tokenizer, model, [cases[i] for i in measured], args.chunks)
        fit(model, epochs_plan(tokenizer, pool, args), args, out)
        model.eval()
        after = case_supports(tokenizer, model, [cases[i] for i in measured], args.chunks)
        for first, second in zip(before, after, strict=True):
            rows.append({**second, "fold": fold, "support_before": first["support"]})
        report[f"fold-{fold}"] = _figures(rows[-len(after) :], balanced_accuracy_score)
    labels = np.array([r["label"] for r in rows])
    report["both folds"] = _figures(rows, balanced_accuracy_score)
    report["both folds"]["roc_auc"] = round(roc_auc_score(labels, [r["support"] for r in rows]), 3)
    report["both folds"]["roc_auc_before"] = round(
        roc_auc_score(labels, [r["support_before"] for r in rows]), 3
    )
    (args.out / "wice-folds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (args.out / "wice-folds.json").write_text(json.dumps(report, indent=2))
    logger.info("%s", json.dumps(report, indent=2))


def _figures(rows: list[dict], balanced_accuracy_score) -> dict:
    labels = [r["label"] for r in rows]
    figures = {"claims": len(rows)}
    for key, name in (("support_before", "before"), ("support", "after")):
        said = [r[key] >= 0.5 for r in rows]
        figures[f"balanced_accuracy_{name}"] = round(balanced_accuracy_score(labels, said), 3)
        for category in ("supported", "partially_supported", "not_supported"):
            among = [s for s, r in zip(said, rows, strict=True) if r["category"] == category]
            figures[f"{category}_called_grounded_{name}"] = f"{sum(among)}/{len(among)}"
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--start", type=Path, default=OUT.parent / "cross-encoder-long")
    parser.add_argument("--out", type=Path, default=OUT.parent / "wice-folds")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=384)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=CHUNKS_PER_CLAIM, help="chunks per claim")
    parser.add_argument("--log-every", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    run(args)


if __name__ == "__main__":
    main()
