"""How fast each kind of fact-checker reads the judge's pairs, at the published checkers' sizes
on random weights (``backend.testing.checker_models``, ``size="large"``): MiniCheck-RoBERTa-L,
MiniCheck-DeBERTa-L and MiniCheck-Flan-T5-L as the judge loads and feeds them
(``backend.engines.fact_checkers``). Speed does not depend on the weights' values; quality is
not measured here.

Each pair is one chunk of the checker's own size (400 tokens, or 500 words for Flan-T5) and a
one-sentence claim, read in the checker's batches; the figure is pairs per second after one
warm-up batch, and what a WiCE-like check (3 claims, 2 chunks each) costs at that rate.

    python -m benchmarks.judge.checker_speed --device cpu --pairs 8
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from backend.testing import checker_models

#: Published checker -> (builder, kind).
CHECKERS = {
    "MiniCheck-RoBERTa-L": (checker_models.roberta_minicheck, "classifier"),
    "MiniCheck-DeBERTa-L": (checker_models.deberta_minicheck, "classifier"),
    "MiniCheck-Flan-T5-L": (checker_models.t5_minicheck, "seq2seq"),
}
CLAIM = "The old tower is tall."
#: A WiCE-like check: claims times chunks read per claim.
CHECK_PAIRS = 3 * 2


def chunk_of(checker) -> str:
    """Text of the checker's full chunk size in its own units, made of words its tokenizer
    keeps whole (one token each), so Flan-T5's 500 words are 500 tokens (about 650 in T5's
    own vocabulary: this rate is a little high)."""
    words = " ".join(checker_models.WORDS).split()
    text = ""
    while checker.count_tokens(text) < checker.chunk_tokens:
        text = " ".join(filter(None, [text, *words]))
    while checker.count_tokens(text) > checker.chunk_tokens:
        text = text.rsplit(" ", 1)[0]
    return text


def measure(name: str, device: str, dtype: str | None, pairs: int) -> dict:
    from backend.engines.fact_checkers import load_fact_checker

    build, kind = CHECKERS[name]
    with tempfile.TemporaryDirectory() as root:
        folder = build(Path(root) / "model", size="large")
        checker = load_fact_checker(str(folder), kind, device, dtype)
    try:
        batch = [(chunk_of(checker), CLAIM)] * pairs
        checker.supports(batch[: min(pairs, 4)])  # warm-up
        started = time.perf_counter()
        read = checker.supports(batch)
        seconds = time.perf_counter() - started
    finally:
        checker.close()
    rate = pairs / seconds
    return {
        "checker": name,
        "device": device,
        "dtype": dtype or "auto",
        "pairs": pairs,
        "tokens_per_pair": read[0][1],
        "pairs_per_s": round(rate, 2),
        "s_per_wice_like_check": round(CHECK_PAIRS / rate, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None, help="float32, bfloat16... (default: auto)")
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--checkers", default=",".join(CHECKERS))
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    for name in args.checkers.split(","):
        row = measure(name, args.device, args.dtype, args.pairs)
        print(json.dumps(row), flush=True)
        with (out / "checker_speed.jsonl").open("a") as handle:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
