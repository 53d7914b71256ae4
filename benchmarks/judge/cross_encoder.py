"""Issue 32's second candidate: the embedded multilingual-e5-small fine-tuned as a cross-encoder.

The claim and one document chunk go through e5 together (``<s> claim </s></s> chunk </s>``);
the mean of the last layer's token states feeds one linear unit whose sigmoid is the chunk's
support. Only low-rank adapters (LoRA, ``peft``) on the top ``--layers`` layers and the unit
train, so the lower layers run without building a graph and what would ship is well under a
megabyte. A response's support is worked out as the judge works it out: its claims
(``split_claims``), each claim's best chunk of 400 tokens (``chunk_context``), the weakest claim.

What it trains on is drawn in ``cross_encoder_pool``.

    python -m benchmarks.judge.cross_encoder train [--threads 2]      # resumable, checkpoints
    python -m benchmarks.judge.cross_encoder evaluate                 # the measured sets

Both write under ``benchmarks/judge/.features/cross-encoder/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from backend.engines.weights.embedded_e5 import EMBEDDED_E5_NAME, resolve_embedding_model
from backend.groundedness.claims import chunk_context, rank_chunks, split_claims
from backend.groundedness.judge import CHUNK_TOKENS, CHUNKS_PER_CLAIM, MAX_CLAIMS
from benchmarks.judge.collect import FEATURES
from benchmarks.judge.cross_encoder_pool import LONG, POOL, first_chunks, training_pool
from benchmarks.judge.datasets import MEASURING, SEED, TRAINING, Case

logger = logging.getLogger("cross_encoder")
OUT = FEATURES / "cross-encoder"


class CrossEncoder(torch.nn.Module):
    """e5's encoder (with adapters when training) and one linear unit over the mean state."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.config.hidden_size, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        mean = (states * mask).sum(1) / mask.sum(1)
        return self.head(mean).squeeze(-1)


def load_e5():
    from transformers import AutoModel, AutoTokenizer

    folder = resolve_embedding_model(EMBEDDED_E5_NAME)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoder = AutoModel.from_pretrained(folder, add_pooling_layer=False)
    return tokenizer, encoder


def with_adapters(encoder: torch.nn.Module, layers: int, rank: int) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    total = encoder.config.num_hidden_layers
    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        lora_dropout=0.1,
        target_modules=["query", "key", "value", "dense"],
        layers_to_transform=list(range(total - layers, total)),
        layers_pattern="layer",
    )
    return get_peft_model(encoder, config)


def batches(
    tokenizer, cases: list[Case], max_length: int, size: int, rng: random.Random
) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Batches of similar lengths (less padding), in a seeded random order."""
    encoded = tokenizer(
        [c.claim for c in cases],
        [c.document for c in cases],
        truncation="only_second",
        max_length=max_length,
    )["input_ids"]
    order = list(range(len(cases)))
    rng.shuffle(order)
    groups = [order[i : i + size * 50] for i in range(0, len(order), size * 50)]
    result = []
    for group in groups:
        group.sort(key=lambda i: len(encoded[i]))
        for start in range(0, len(group), size):
            chosen = group[start : start + size]
            result.append(
                _padded(tokenizer, [encoded[i] for i in chosen], [cases[i].label for i in chosen])
            )
    rng.shuffle(result)
    return result


def _padded(tokenizer, ids: list[list[int]], labels: list[int]):
    width = max(len(row) for row in ids)
    input_ids = torch.full((len(ids), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for row, tokens in enumerate(ids):
        input_ids[row, : len(tokens)] = torch.tensor(tokens)
        mask[row, : len(tokens)] = 1
    return input_ids, mask, torch.tensor(labels, dtype=torch.float32)


def train(args: argparse.Namespace) -> None:
    torch.manual_seed(SEED)
    tokenizer, encoder = load_e5()
    model = CrossEncoder(with_adapters(encoder, args.layers, args.rank))
    pool = first_chunks(tokenizer, training_pool(args.long)[: args.limit or None])
    fit(model, epochs_plan(tokenizer, pool, args), args, args.out)
    save_parameters(model, args, Counter(case.source for case in pool))


def epochs_plan(tokenizer, pool: list[Case], args: argparse.Namespace) -> list:
    """``args.epochs`` passes over ``pool`` in batches, each pass in its own seeded order."""
    return [
        batch
        for epoch in range(args.epochs)
        for batch in batches(
            tokenizer, pool, args.max_length, args.batch, random.Random(SEED + epoch)
        )
    ]


def fit(model: CrossEncoder, plan: list, args: argparse.Namespace, out: Path) -> None:
    """AdamW with warm-up and linear decay over ``plan``, resumable from ``out``'s checkpoint."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01)
    warmup = max(1, len(plan) // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / warmup, max(0.0, (len(plan) - step) / (len(plan) - warmup))),
    )
    checkpoint = out / "checkpoint.pt"
    first = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"], strict=False)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["rng"])
        first = state["step"]
        logger.info("resumed at step %d of %d", first, len(plan))
    logger.info("%d batches, %d trainable parameters", len(plan), sum(p.numel() for p in trainable))
    model.train()
    loss_fn = torch.nn.BCEWithLogitsLoss()
    started, seen, running = time.monotonic(), 0, []
    for step in range(first, len(plan)):
        input_ids, mask, labels = plan[step]
        loss = loss_fn(model(input_ids, mask), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        seen += len(labels)
        running.append(loss.item())
        if (step + 1) % args.log_every == 0:
            rate = seen / (time.monotonic() - started)
            logger.info(
                "step %d/%d loss %.4f  %.1f pairs/s", step + 1, len(plan), np.mean(running), rate
            )
            running = []
        if (step + 1) % 200 == 0 or step + 1 == len(plan):
            _save_checkpoint(checkpoint, model, optimizer, schedule, step + 1)


def _trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _save_checkpoint(path: Path, model, optimizer, schedule, step: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "model": _trainable_state(model),
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "rng": torch.get_rng_state(),
        "step": step,
    }
    torch.save(state, path.with_suffix(".tmp"))
    path.with_suffix(".tmp").replace(path)


def save_parameters(model: torch.nn.Module, args: argparse.Namespace, drawn: Counter) -> None:
    from safetensors.torch import save_file

    tensors = {n: t.contiguous() for n, t in _trainable_state(model).items()}
    save_file(tensors, args.out / "cross-encoder.safetensors")
    (args.out / "cross-encoder.json").write_text(
        json.dumps(
            {
                "args": {k: str(v) for k, v in vars(args).items()},
                "seed": SEED,
                "pool_caps": {k: v[1] for k, v in (POOL | (LONG if args.long else {})).items()},
                "pool_drawn": dict(drawn),
                "excluded": "every case of datasets.TRAINING (the learned reading's pool)",
            },
            indent=2,
        )
    )
    logger.info("wrote %s", args.out / "cross-encoder.safetensors")


def load_trained(args: argparse.Namespace) -> tuple[object, CrossEncoder]:
    from safetensors.torch import load_file

    tokenizer, encoder = load_e5()
    model = CrossEncoder(with_adapters(encoder, args.layers, args.rank))
    model.load_state_dict(load_file(args.out / "cross-encoder.safetensors"), strict=False)
    model.eval()
    return tokenizer, model


@torch.inference_mode()
def pair_supports(tokenizer, model, pairs: list[tuple[str, str]], batch: int = 16) -> list[float]:
    """sigmoid(score) of each (claim, chunk), read in batches of similar length."""
    encoded = tokenizer(
        [c for c, _ in pairs], [d for _, d in pairs], truncation="only_second", max_length=512
    )["input_ids"]
    order = sorted(range(len(pairs)), key=lambda i: len(encoded[i]))
    supports = [0.0] * len(pairs)
    for start in range(0, len(order), batch):
        chosen = order[start : start + batch]
        input_ids, mask, _ = _padded(tokenizer, [encoded[i] for i in chosen], [0] * len(chosen))
        for i, score in zip(chosen, torch.sigmoid(model(input_ids, mask)).tolist(), strict=True):
            supports[i] = score
    return supports


def case_supports(tokenizer, model, cases: list[Case], chunks_per_claim: int) -> list[dict]:
    """Each case's weakest claim's best chunk among its ``chunks_per_claim`` likeliest (as
    the judge ranks them), with the per-claim supports."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    layout, pairs = [], []
    for case in cases:
        chunks = chunk_context(case.document, CHUNK_TOKENS, count)
        claims = split_claims(case.claim, MAX_CLAIMS)
        read = [rank_chunks(claim, chunks)[:chunks_per_claim] for claim in claims]
        layout.append([len(order) for order in read])
        pairs.extend(
            (claim, chunks[i]) for claim, order in zip(claims, read, strict=True) for i in order
        )
    supports = iter(pair_supports(tokenizer, model, pairs))
    rows = []
    for case, counts in zip(cases, layout, strict=True):
        best = [max(next(supports) for _ in range(n)) for n in counts]
        rows.append({**case.record(), "document": None, "claims": best, "support": min(best)})
    return rows


def evaluate(args: argparse.Namespace) -> None:
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    tokenizer, model = load_trained(args)
    held = [case for draw in TRAINING.values() for case in draw()]
    sets = {"learned-reading-pool": held} | {
        name: MEASURING[name]() for name in args.sets.split(",")
    }
    if args.limit:
        sets = {name: cases[: args.limit] for name, cases in sets.items()}
    report = {}
    for name, cases in sets.items():
        started = time.monotonic()
        rows = case_supports(tokenizer, model, cases, args.chunks_per_claim)
        seconds = (time.monotonic() - started) / len(rows)
        (args.out / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        clear = [r for r in rows if not r["ambiguous"]] or rows
        labels = np.array([r["label"] for r in clear])
        supports = np.array([r["support"] for r in clear])
        figures = {
            "cases": len(clear),
            "balanced_accuracy_at_0.5": round(balanced_accuracy_score(labels, supports >= 0.5), 3),
            "roc_auc": round(roc_auc_score(labels, supports), 3) if len(set(labels)) > 1 else None,
            "seconds_per_case": round(seconds, 3),
        }
        for key in ("language", "source", "category"):
            groups = sorted({r[key] for r in clear})
            if 1 < len(groups) <= 12:
                figures[f"by_{key}"] = {
                    g: _balanced_or_share([r for r in clear if r[key] == g]) for g in groups
                }
        report[name] = figures
        logger.info("%s: %s", name, json.dumps(figures))
    (args.out / "evaluation.json").write_text(json.dumps(report, indent=2))


def _balanced_or_share(rows: list[dict]) -> float:
    """Balanced accuracy at 0.5, or the share called right where one label only."""
    from sklearn.metrics import balanced_accuracy_score

    labels = [r["label"] for r in rows]
    said = [r["support"] >= 0.5 for r in rows]
    if len(set(labels)) > 1:
        return round(balanced_accuracy_score(labels, said), 3)
    return round(
        float(np.mean([s == bool(label) for s, label in zip(said, labels, strict=True)])), 3
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("train", "evaluate"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=6, help="top layers given adapters")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=320)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--long", action="store_true", help="add the long-premise sources")
    parser.add_argument("--chunks-per-claim", type=int, default=CHUNKS_PER_CLAIM)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--limit", type=int, default=0, help="a smoke run: this many cases")
    parser.add_argument("--sets", default="kornli-dev,jnli-valid,v2-test,wice-dev,v1")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    (train if args.command == "train" else evaluate)(args)


if __name__ == "__main__":
    main()
