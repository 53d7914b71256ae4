"""Read every case of the learned judge's sets through the judge, keeping what it reads.

For each case the judge runs as it does in the service (chunks, claims, the support
question, each claim against its likeliest chunks), reading every chunk it would consider
(no early stop), and each (claim, chunk) reading's P(yes) and the model's final hidden state
at the answer position are appended to ``benchmarks/judge/.features/<profile>/<set>.jsonl``
(git-ignored). A rerun resumes after the last case written, so the collection can be stopped
and restarted; it is the slow part of ``make train-judge``.

    python -m benchmarks.judge.collect --profile default [--sets mnli,fever,...]
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.judge.datasets import MEASURING, ROOT, TRAINING

FEATURES = ROOT / "benchmarks" / "judge" / ".features"
#: What ``make train-judge`` collects: the training pool and the two short measured sets
#: (about an hour for the default profile on 2 cores). The long measured sets (WiCE dev, the
#: second set) cost 10-30 s a pair read in full; ``make eval`` measures them through the
#: service instead.
DEFAULT_SETS = (*TRAINING, "kornli-dev", "jnli-valid")


def features_path(profile: str, name: str) -> Path:
    return FEATURES / profile / f"{name}.jsonl"


def encode(hidden: np.ndarray) -> str:
    return base64.b64encode(hidden.astype(np.float16).tobytes()).decode("ascii")


def decode(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=np.float16).astype(np.float32)


def load(profile: str, name: str) -> list[dict]:
    """The collected rows of one set (each case's record with its readings)."""
    path = features_path(profile, name)
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def collect(profile: str, names: list[str]) -> None:
    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.engines.loader import load_chat_engine
    from backend.groundedness.judge import GroundednessJudge

    engine = load_chat_engine(PROFILE_CHAT_MODELS[profile], "llama.cpp")
    judge = GroundednessJudge(engine, questions=("support",), hidden_states=True)
    sets = {**TRAINING, **MEASURING}
    try:
        for name in names:
            path = features_path(profile, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            done = {row["id"] for row in load(profile, name)}
            cases = [case for case in sets[name]() if case.id not in done]
            with path.open("a", encoding="utf-8") as out:
                for case in tqdm(cases, desc=name, mininterval=30):
                    assessment, readings = judge.read(case.document, case.claim)
                    row = case.record() | {
                        "claims": len(assessment.claims),
                        "prompt_tokens": assessment.prompt_tokens,
                        "readings": [
                            {
                                "claim": r.claim,
                                "chunk": r.chunk,
                                "p_yes": r.p_yes["support"],
                                "hidden": encode(r.hidden),
                            }
                            for r in readings
                        ],
                    }
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                    out.flush()
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default", choices=["default", "small"])
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    collect(args.profile, args.sets.split(","))


if __name__ == "__main__":
    main()
