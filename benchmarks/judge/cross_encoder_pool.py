"""What the cross-encoder (``cross_encoder``) trains on.

The pool is drawn (``SEED``) from the same public sources as the learned reading's, **minus
every case the learned reading was trained on**: those 1,784 cases stay out, so that the
cross-encoder's scores on them are held-out scores a stacked reading can be fitted on.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import replace

from backend.groundedness.claims import chunk_context, rank_chunks
from backend.groundedness.judge import CHUNK_TOKENS
from benchmarks.judge.datasets import (
    SEED,
    TRAINING,
    Case,
    _balanced,
    begin_v1,
    contrl,
    docnli,
    janli,
    jsick,
    kornli,
    mctest,
    summac,
)

logger = logging.getLogger("cross_encoder")

#: The training pool: (source, at most this many cases, drawn half of each label). 17,276
#: pairs are drawn (the sets with fewer entailments give fewer); one epoch took 26 minutes
#: on one core.
POOL: dict[str, tuple[Callable[[], list[Case]], int]] = {
    "mnli": (lambda: docnli("MNLI"), 5000),
    "fever": (lambda: docnli("FEVER-NLI"), 5000),
    "kornli-test": (lambda: kornli("test"), 4600),
    "jsick": (lambda: jsick(), 3000),
    "janli": (lambda: janli(), 3000),
    "begin-v1": (begin_v1, 686),
}

#: With ``--long``: sources whose premises are longer than one judge chunk (ConTRoL's exam
#: passages, MCTest's stories, SummaC's news articles). Each trains on the claim and the chunk
#: the judge would read first (``rank_chunks``), as it reads long documents.
LONG: dict[str, tuple[Callable[[], list[Case]], int]] = {
    "contrl": (contrl, 572),
    "mctest": (mctest, 2000),
    "summac": (summac, 774),
}


def training_pool(long: bool = False) -> list[Case]:
    """The pool, without the learned reading's training cases, shuffled with ``SEED``."""
    held = {case.id for draw in TRAINING.values() for case in draw()}
    pool = []
    for name, (load, count) in (POOL | (LONG if long else {})).items():
        cases = [case for case in load() if case.id not in held]
        fewer = min(sum(c.label for c in cases), sum(1 - c.label for c in cases))
        chosen = _balanced(cases, min(count, 2 * fewer), SEED + 1)  # half of each label
        logger.info("%s: %d cases (%d grounded)", name, len(chosen), sum(c.label for c in chosen))
        pool.extend(chosen)
    random.Random(SEED).shuffle(pool)
    return pool


def first_chunks(tokenizer, cases: list[Case]) -> list[Case]:
    """Each case with its document cut to the chunk the judge would read first."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    read = []
    for case in cases:
        chunks = chunk_context(case.document, CHUNK_TOKENS, count)
        if len(chunks) > 1:
            case = replace(case, document=chunks[rank_chunks(case.claim, chunks)[0]])
        read.append(case)
    return read
