"""The judge read other ways, beside the judge as it ships, on one set (issue 32).

Every variant runs the service's own judge (its reader, questions, learned reading, one cut
and early stop; default profile) on the set's first pairs:

- ``shipped``: the judge as the service reads it, to compare the others with in one run.
- ``facts``: the chat model splits the claim into facts (a few-shot prompt, greedy), and the
  judge reads the facts as a response of several claims, so the weakest fact decides; the
  whole claim is read again beside it.
- ``assembled``: the judge with ``evidence="sentences"``: each claim read against the
  context's sentences likeliest to hold its evidence (ranked by the judge's own term
  overlap), in document order, up to one chunk's tokens (``claims.assemble_evidence``):
  evidence spread over the context in one reading instead of the two likeliest chunks.

Sets: ``make eval``'s groundedness sections (``wice_dev`` by default) or the second set's
train split (``groundedness_v2_train``); ``--long`` keeps the long contexts only, the only
pairs ``assembled`` reads differently. The variant is compared with the ``shipped`` rows of
the same set where they were read, else with ``make eval``'s verdicts (the judge gives the
same verdict to the same request). Rows are appended to
``benchmarks/judge/.features/variants/<variant>-<set>.jsonl`` (git-ignored), so a run
resumes where it stopped; the figures are printed at the end.

    python -m benchmarks.judge.variants --variant assembled --set wice_dev --limit 150
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from tqdm import tqdm

from backend.groundedness.judge import GroundednessJudge
from benchmarks.eval.metrics import GROUNDED, NOT_GROUNDED, balanced_accuracy
from benchmarks.eval.run_eval import EVAL_DIR, groundedness_cases, load_jsonl
from benchmarks.judge.collect import FEATURES

FACTS_PROMPT = """\
Break the claim into independent facts, one complete sentence per line. Each fact must repeat \
its subject (a name or noun, never "he", "she" or a fragment) and say only what the claim says.

Claim: Marie Curie, a Polish-born physicist, won the Nobel Prize in Physics in 1903 and in \
Chemistry in 1911.
Marie Curie was a physicist.
Marie Curie was born in Poland.
Marie Curie won the Nobel Prize in Physics in 1903.
Marie Curie won the Nobel Prize in Chemistry in 1911.

Claim: The album, produced by Rick Rubin, was released in March 2010.
The album was produced by Rick Rubin.
The album was released in March 2010.

Claim: The bridge is 2 km long.
The bridge is 2 km long.

Claim: {claim}"""
#: Facts kept of one claim (the model sometimes repeats itself).
MAX_FACTS = 6


def facts_of(answer: str) -> list[str]:
    """The facts listed in the model's answer: one a line, bullets stripped, repeats dropped,
    stopping where the model starts a claim of its own."""
    facts: list[str] = []
    for line in answer.splitlines():
        line = line.strip().lstrip("-*•").strip()
        if line.lower().startswith("claim:"):
            break
        if line and line not in facts:
            facts.append(line)
    return facts[:MAX_FACTS]


class Variants:
    """The default profile's service, and what each variant asks of it."""

    def __init__(self, profile: str) -> None:
        from backend.backends.local import InProcessBackend

        self.backend = InProcessBackend(profile=profile)
        self.service = self.backend._groundedness_service.get()

    def facts(self, case: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        reply = self.backend.chat(
            {
                "model": "core-1-mini-chat",
                "temperature": 0,
                "max_tokens": 200,
                "messages": [
                    {"role": "user", "content": FACTS_PROMPT.format(claim=case["response"])}
                ],
            }
        )
        facts = facts_of(reply.choices[0].message.content or "") or [case["response"]]
        split = time.perf_counter()
        row = {"facts": facts, **self._judged(case["context"], "\n".join(facts), "chunks")}
        judged = time.perf_counter()
        row["whole"] = self._judged(case["context"], case["response"], "chunks")["verdict"]
        row["seconds"] = {"split": split - started, "facts": judged - split}
        return row

    def shipped(self, case: dict[str, Any]) -> dict[str, Any]:
        return self._judged(case["context"], case["response"], "chunks")

    def assembled(self, case: dict[str, Any]) -> dict[str, Any]:
        return self._judged(case["context"], case["response"], "sentences")

    def _judged(self, context: str, response: str, evidence: str) -> dict[str, Any]:
        """The service's judge (its reader, questions, learned reading, thresholds and early
        stop), looking for each claim's evidence as ``evidence`` says."""
        started = time.perf_counter()
        calibration = self.service.calibration
        judge = GroundednessJudge(
            self.service.reader.engine,
            questions=calibration.questions,
            stop_at=calibration.thresholds,
            learned=calibration.learned,
            evidence=evidence,
        )
        with self.service.reader.turn():
            assessment = judge.assess(context, response)
        return {
            "verdict": calibration.verdict(assessment.support),
            "support": assessment.support,
            "seconds": time.perf_counter() - started,
        }


#: A set of pairs beside ``make eval``'s sections: the second set's train split (its clear
#: pairs), which calibrations may be tuned on.
V2_TRAIN = "groundedness_v2_train"


def cases_of(section: str, limit: int, long_only: bool = False) -> list[dict[str, Any]]:
    """The set's pairs; with ``long_only`` those whose context is long (``make eval``'s mark:
    over 3,000 characters), the only ones the ``assembled`` variant reads differently."""
    if section == V2_TRAIN:
        pairs = load_jsonl("groundedness_v2.jsonl")
        cases = [c for c in pairs if c.get("split") == "train" and c["clear"]]
    else:
        cases = groundedness_cases(section, None)
    return [c for c in cases if c["long_context"] or not long_only][:limit]


def run(
    variant: str, section: str, limit: int, profile: str, long_only: bool = False
) -> list[dict[str, Any]]:
    path = FEATURES / "variants" / f"{variant}-{section}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in path.open()] if path.exists() else []
    done = {row["id"] for row in rows}
    wanted = cases_of(section, limit, long_only)
    cases = [c for c in wanted if c["id"] not in done]
    if cases:
        variants = Variants(profile)
        try:
            for case in tqdm(cases, desc=variant, unit="claim"):
                row = {key: case[key] for key in ("id", "label", "category", "language")}
                row["long_context"] = case["long_context"]
                row.update(getattr(variants, variant)(case))
                rows.append(row)
                with path.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        finally:
            variants.backend.close()
    ids = {c["id"] for c in wanted}
    return [row for row in rows if row["id"] in ids]


def figures(rows: list[dict[str, Any]], verdicts: list[str]) -> dict[str, Any]:
    labels = [row["label"] for row in rows]
    categories = sorted({row["category"] for row in rows})
    pairs = list(zip(rows, verdicts, strict=True))
    called = {c: sum(v == GROUNDED for row, v in pairs if row["category"] == c) for c in categories}
    totals = {c: sum(row["category"] == c for row in rows) for c in categories}

    def accuracy_where(keep) -> float | None:
        kept = [(row["label"], v) for row, v in pairs if keep(row)]
        return round(balanced_accuracy(*zip(*kept, strict=True)), 3) if kept else None

    languages = sorted({row.get("language", "en") for row in rows})
    return {
        "balanced_accuracy": round(balanced_accuracy(labels, verdicts), 3),
        "by_language": {
            lang: accuracy_where(lambda r, lang=lang: r.get("language", "en") == lang)
            for lang in languages
        },
        "long_contexts": accuracy_where(lambda r: r.get("long_context", True)),
        "called_grounded": {c: f"{called[c]}/{totals[c]}" for c in called},
    }


def baseline(section: str, profile: str) -> tuple[str, dict[str, str]]:
    """The shipped judge's verdicts on the set: from this module's ``shipped`` rows where
    they were read, else from ``make eval``'s results."""
    path = FEATURES / "variants" / f"shipped-{section}.jsonl"
    if path.exists():
        rows = [json.loads(line) for line in path.open()]
        return "shipped judge (this module)", {row["id"]: row["verdict"] for row in rows}
    results = json.loads((EVAL_DIR / f"results-{profile}.json").read_text())
    return "shipped judge (make eval)", {r["id"]: r["verdict"] for r in results[section]["cases"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=("facts", "assembled", "shipped"), required=True)
    parser.add_argument("--set", default="wice_dev", help=f"a make eval section, or {V2_TRAIN}")
    parser.add_argument("--limit", type=int, default=150)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--long", action="store_true", help="only pairs with long contexts")
    args = parser.parse_args()
    rows = run(args.variant, args.set, args.limit, args.profile, args.long)
    name, shipped = baseline(args.set, args.profile)
    rows = [row for row in rows if row["id"] in shipped]
    either = [
        GROUNDED if GROUNDED in (row["verdict"], shipped[row["id"]]) else NOT_GROUNDED
        for row in rows
    ]
    report = {
        "pairs": len(rows),
        name: figures(rows, [shipped[row["id"]] for row in rows]),
        args.variant: figures(rows, [row["verdict"] for row in rows]),
        f"shipped or {args.variant}": figures(rows, either),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
