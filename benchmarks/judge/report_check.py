"""The groundedness report against the plain check, on the measured groundedness sets.

For every check of the first groundedness set (``first``), the second set's test split
(``second``) and WiCE dev (``wice``) it asks the plain check and the report of the same
in-process backend, in alternating order (so that neither always finds the other's prompts in
the engine's cache), and asserts what the report promises:

* its verdict is the plain check's;
* every claim's offsets cut its text out of the response, every evidence offset its chunk
  out of the context;
* the corrected response holds every claim judged grounded, in order, and no other claim
  (unless its text is part of a kept claim's).

The plain check is the spec's request (``chat``), the report ``check_groundedness_report``.
It prints, per set, the counts, the balanced accuracy of the verdicts (the same for both, by
the first promise), and the prompt tokens and seconds per check of each: the report reads
what the plain check reads, so its prompt tokens are the same (unless the engine's prompt
cache moved a support across a threshold where the judge stops reading) and its seconds
differ by the bookkeeping alone, and by the noise of a shared machine.

    python -m benchmarks.judge.report_check --profile small --sets first,second,wice --limit 5

With ``--reader overlap`` no model runs either: P(yes) is the share of a claim's terms found in
the chunk (``backend.testing.TermOverlapJudgeEngine``, with the profile's tokenizer, so chunks
are cut as with the model), and thresholds 0.8 / 0.5 give claims of all three verdicts: the
promises checked on every check of the sets, in minutes.

With ``--spans`` no model runs: it counts, with the profile's tokenizer, how many claims and
chunks the judge reads differently from their ranges in the response and context (a merged
claim's sentences read joined by one space, a chunk's paragraphs or sentences by a blank
line), which is why the judge reads the joined texts and the report gives the ranges.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from backend.groundedness.claims import chunk_pieces, claim_pieces
from backend.groundedness.judge import CHUNK_TOKENS, MAX_CLAIMS
from backend.groundedness.request import groundedness_request, read_verdict
from backend.protocol.groundedness_report import GroundednessReport
from benchmarks.eval import metrics
from benchmarks.eval.run_eval import groundedness_cases

#: The sets by their short names: ``make eval``'s groundedness sections.
SETS = {"first": "groundedness", "second": "groundedness_heldout", "wice": "wice_dev"}


def check_report(context: str, response: str, report: GroundednessReport, verdict: str) -> None:
    """Assert the report's promises for one check (see the module's docstring).

    Raises:
        AssertionError: naming the promise broken.
    """
    assert report.verdict == verdict, f"report {report.verdict} != plain check {verdict}"
    for claim in report.claims:
        assert response[claim.start : claim.end] == claim.text, f"claim offsets {claim}"
        for evidence in claim.evidence:
            assert context[evidence.start : evidence.end] == evidence.text, "evidence offsets"
    kept = [c.text for c in report.claims if c.verdict == "grounded"]
    position = 0
    for text in kept:
        found = report.corrected_response.find(text, position)
        assert found >= 0, f"a grounded claim missing from the corrected response: {text!r}"
        position = found + len(text)
    for claim in report.claims:
        if claim.verdict != "grounded" and not any(claim.text in text for text in kept):
            assert claim.text not in report.corrected_response, f"kept unsupported {claim.text!r}"


def compare(backend: Any, cases: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Both answers for every case, the promises asserted; the figures of the set."""
    seconds = {"plain": 0.0, "report": 0.0}
    verdicts, counts, tokens = [], Counter(), Counter()
    for number, case in enumerate(cases):
        context, response = case["context"], case["response"]
        order = ("plain", "report") if number % 2 == 0 else ("report", "plain")
        for kind in order:
            started = time.perf_counter()
            if kind == "plain":
                completion = backend.chat(groundedness_request(context, response))
                verdict, read = read_verdict(completion), completion.usage.prompt_tokens
            else:
                report = backend.check_groundedness_report(context, response)
            seconds[kind] += time.perf_counter() - started
        check_report(context, response, report, verdict)
        verdicts.append(verdict)
        counts["reports of the same prompt tokens"] += report.usage.prompt_tokens == read
        tokens["plain"] += read
        tokens["report"] += report.usage.prompt_tokens
        counts["claims"] += len(report.claims)
        counts["claims decided early"] += sum(c.decided_early for c in report.claims)
        counts["claims not grounded"] += sum(c.verdict != "grounded" for c in report.claims)
        counts["responses corrected"] += report.corrected_response != response
    clear = [
        (c["label"], v)
        for c, v in zip(cases, verdicts, strict=True)
        if c["clear"] and c["label"] in ("grounded", "notGrounded")
    ]
    return {
        "checks": len(cases),
        **counts,
        "balanced accuracy": metrics.balanced_accuracy(
            [label for label, _ in clear], [verdict for _, verdict in clear]
        )
        if clear
        else None,
        "prompt tokens per plain check": tokens["plain"] / max(len(cases), 1),
        "prompt tokens per report": tokens["report"] / max(len(cases), 1),
        "seconds per plain check": seconds["plain"] / max(len(cases), 1),
        "seconds per report": seconds["report"] / max(len(cases), 1),
    }


def span_differences(cases: Sequence[dict[str, Any]], count_tokens: Any) -> dict[str, int]:
    """How many claims and chunks the judge reads as other than their ranges' text."""
    counts: Counter[str] = Counter()
    for case in cases:
        context, response = case["context"], case["response"]
        claims = claim_pieces(response, MAX_CLAIMS)
        chunks = chunk_pieces(context, CHUNK_TOKENS, count_tokens)
        counts["checks"] += 1
        counts["claims"] += len(claims)
        counts["claims read otherwise"] += sum(p.text != response[p.start : p.end] for p in claims)
        counts["checks of several chunks"] += len(chunks) > 1
        counts["chunks"] += len(chunks)
        counts["chunks read otherwise"] += sum(p.text != context[p.start : p.end] for p in chunks)
        counts["checks with a chunk read otherwise"] += any(
            p.text != context[p.start : p.end] for p in chunks
        )
    return dict(counts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="small", choices=("default", "small"))
    parser.add_argument("--sets", default="first,second,wice", help="of " + ", ".join(SETS))
    parser.add_argument("--limit", type=int, default=None, help="checks per set")
    parser.add_argument("--spans", action="store_true", help="count span differences only")
    parser.add_argument(
        "--reader",
        default="model",
        choices=("model", "overlap"),
        help="overlap: no model, P(yes) the claim's term overlap (the promises on every check)",
    )
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = [name for name in names if name not in SETS]
    if unknown:
        parser.error(f"unknown sets {unknown}; choose from {sorted(SETS)}")
    if args.spans:
        from backend.backends.remote_engine.judge_reading import embedded_chat_tokenizer

        tokenizer = embedded_chat_tokenizer(args.profile)
        count = lambda text: len(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
        for name in names:
            print(name, span_differences(groundedness_cases(SETS[name], args.limit), count))
        return 0
    from backend.backends.local import InProcessBackend

    options: dict[str, Any] = {}
    if args.reader == "overlap":
        from backend.backends.remote_engine.judge_reading import embedded_chat_tokenizer
        from backend.testing import CharCountEmbeddingEngine, TermOverlapJudgeEngine

        engine = TermOverlapJudgeEngine(embedded_chat_tokenizer(args.profile))
        # a notSure band, so that claims of all three verdicts are reported
        options = dict(chat_engine_instance=engine, grounded_at=0.8, not_grounded_below=0.5)
        options["embedding_engine_instance"] = CharCountEmbeddingEngine()
    with InProcessBackend(profile=args.profile, **options) as backend:
        for name in names:
            figures = compare(backend, groundedness_cases(SETS[name], args.limit))
            print(name, figures, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
