"""How often the judge's chunk ranking agrees with the e5 encoder's, per language.

    .venv/bin/python -m benchmarks.eval.chunk_ranking

The judge reads each claim against the two chunks that share the most rare terms with it
(``backend.groundedness.claims.rank_chunks``: words, and character pairs for Korean and
Japanese, written without spaces between words). No set marks which chunk holds a claim's
evidence, so this compares the ranking with an independent one: the multilingual e5 encoder's
(query: the claim, passages: the chunks). For every claim of a clear long-context train pair
of both groundedness sets it counts how often e5's first chunk is among the two the judge
reads, and the judge's first among e5's first two. A ranking that failed on text without
spaces would agree with e5 far less often in Korean and Japanese than in English.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.eval.calibrate import DEFAULT_SETS, calibration_cases


def main() -> int:
    from backend.backends.local import InProcessBackend
    from backend.backends.remote_engine.judge_reading import embedded_chat_tokenizer
    from backend.groundedness.claims import chunk_context, rank_chunks, split_claims
    from backend.groundedness.judge import CHUNK_TOKENS, CHUNKS_PER_CLAIM, MAX_CLAIMS
    from backend.protocol.catalogue import PASSAGE_MODEL, QUERY_MODEL

    backend = InProcessBackend(profile="small")
    tokenizer = embedded_chat_tokenizer("small")  # the Qwen2.5 vocabulary, as the judge counts

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))

    def vectors(model: str, texts: list[str]) -> np.ndarray:
        return np.array(backend.embed({"model": model, "input": texts}).float_vectors())

    counts: dict[str, list[int]] = {}
    seen: set[str] = set()
    for case in calibration_cases(DEFAULT_SETS):
        if not (case["long_context"] and case["clear"]):
            continue
        chunks = chunk_context(case["context"], CHUNK_TOKENS, count_tokens)
        passages = vectors(PASSAGE_MODEL, chunks)
        for claim in split_claims(case["response"], MAX_CLAIMS):
            if claim in seen:
                continue
            seen.add(claim)
            by_e5 = list(np.argsort(-(passages @ vectors(QUERY_MODEL, [claim])[0])))
            by_terms = rank_chunks(claim, chunks)
            tally = counts.setdefault(case["language"], [0, 0, 0])
            tally[0] += 1
            tally[1] += by_e5[0] in by_terms[:CHUNKS_PER_CLAIM]
            tally[2] += by_terms[0] in by_e5[:CHUNKS_PER_CLAIM]
    backend.close()
    print("language  claims  e5's first in the judge's two  the judge's first in e5's two")
    for language, (claims, e5_first, terms_first) in sorted(counts.items()):
        print(f"{language:8} {claims:7} {e5_first / claims:31.2f} {terms_first / claims:31.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
