"""The (document, claim, label) cases the learned judge is trained and measured on.

Every case comes from ``../shared/data/nli`` (public NLI and fact-verification sets, each
folder's SOURCE.md says where from and under which licence) or from the project's own
groundedness sets in ``benchmarks/eval``. Labels follow the shared README's mapping:
entailment / supported / "Fully attributable" -> 1 (grounded), everything else -> 0.
``ambiguous`` marks the pairs a notSure band is meant for (WiCE ``partially_supported``, BEGIN
``generic`` responses, the project's ambiguous pairs).

Which cases train and which measure is decided here, in ``TRAINING`` and ``MEASURING``, with
fixed seeds: the training pool never overlaps a measured split (KorNLI trains on its test file
and is measured on its dev file, Japanese trains on JSICK/JaNLI train and is measured on JNLI
valid, WiCE dev and the second groundedness set's test split are never trained on). The one
exception is ``wice_folds``, an experiment that trains on half of WiCE dev's oracle chunks and
measures only the other half.
"""

from __future__ import annotations

import csv
import json
import lzma
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED_NLI = ROOT.parent / "shared" / "data" / "nli"
EVAL = ROOT / "benchmarks" / "eval"
SEED = 20261127


@dataclass(frozen=True)
class Case:
    """One document and one claim (or response) with its label."""

    id: str
    source: str
    language: str
    document: str
    claim: str
    label: int
    category: str = ""
    ambiguous: bool = False

    def record(self) -> dict:
        return asdict(self)


def _open(path: Path):
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _tsv(path: Path, header: bool = True) -> Iterator[dict | list]:
    with _open(path) as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        if not header:
            yield from reader
            return
        names = next(reader)
        for row in reader:
            yield dict(zip(names, row, strict=False))


def _docnli_file(path: Path, prefix: str, source: str, max_chars: int | None = None):
    """Cases from one of DocNLI's files: label, premise, hypothesis per line."""
    cases = []
    for number, row in enumerate(_tsv(path, header=False)):
        if len(row) != 3 or (max_chars is not None and len(row[1]) > max_chars):
            continue
        label, premise, hypothesis = row
        entailed = int(label == "entailment")
        cases.append(Case(f"{prefix}-{number}", source, "en", premise, hypothesis, entailed, label))
    return cases


def docnli(name: str) -> list[Case]:
    """binary-MNLI or binary-FEVER-NLI's dev file, premises of one judge chunk at most."""
    path = SHARED_NLI / "docnli-aux" / f"binary-{name}" / "dev.txt.xz"
    return _docnli_file(path, name, name.lower(), max_chars=1500)


def kornli(split: str) -> list[Case]:
    path = SHARED_NLI / "kornli-xnli" / f"xnli.{split}.ko.tsv"
    return [
        Case(
            f"kornli-{split}-{n}",
            f"kornli-{split}",
            "ko",
            row["sentence1"],
            row["sentence2"],
            int(row["gold_label"] == "entailment"),
            row["gold_label"],
        )
        for n, row in enumerate(_tsv(path))
    ]


def jsick() -> list[Case]:
    return [
        Case(
            f"jsick-{row['pair_ID']}",
            "jsick",
            "ja",
            row["sentence_A_Ja"],
            row["sentence_B_Ja"],
            int(row["entailment_label_Ja"] == "entailment"),
            row["entailment_label_Ja"],
        )
        for row in _tsv(SHARED_NLI / "jsick" / "jsick.tsv.xz")
        if row["data"] == "train"
    ]


def janli() -> list[Case]:
    return [
        Case(
            f"janli-{row['']}",
            "janli",
            "ja",
            row["sentence_A_Ja"],
            row["sentence_B_Ja"],
            int(row["entailment_label_Ja"] == "entailment"),
            row["heuristics"],
        )
        for row in _tsv(SHARED_NLI / "janli" / "janli.tsv.xz")
        if row["split"] == "train"
    ]


def _json_lines(path: Path) -> list[dict]:
    with _open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _sentence_pairs(rows: list[dict], source: str, language: str, keys: tuple, entailed: str):
    """Cases from rows of one NLI file; ``keys`` names (id, premise, hypothesis, label)."""
    number, premise, hypothesis, label = keys
    return [
        Case(
            f"{source.split('-')[0]}-{row[number]}",
            source,
            language,
            row[premise],
            row[hypothesis],
            int(row[label] == entailed),
            row[label],
        )
        for row in rows
    ]


def jnli() -> list[Case]:
    rows = _json_lines(SHARED_NLI / "jnli" / "valid-v1.3.json")
    keys = ("sentence_pair_id", "sentence1", "sentence2", "label")
    return _sentence_pairs(rows, "jnli-valid", "ja", keys, "entailment")


def begin_v1() -> list[Case]:
    return [
        Case(
            f"begin1-{n}",
            "begin-v1",
            "en",
            row["evidence"],
            row["response"],
            int(row["gold label"] == "entailment"),
            row["gold label"],
        )
        for n, row in enumerate(_tsv(SHARED_NLI / "begin" / "v1_2021" / "dev_05_24_21.tsv"))
    ]


def begin_v2() -> list[Case]:
    """BEGIN v2 dev (three dialogue corpora): ``generic`` responses are the ambiguous ones."""
    cases = []
    for corpus in ("wow", "tc", "cmu"):
        path = SHARED_NLI / "begin" / "v2_2022" / f"begin_dev_{corpus}.tsv"
        for n, row in enumerate(_tsv(path)):
            label = row["begin_label"]
            cases.append(
                Case(
                    f"begin2-{corpus}-{n}",
                    "begin-v2",
                    "en",
                    row["knowledge"],
                    row["response"],
                    int(label == "Fully attributable"),
                    label,
                    ambiguous=label == "Generic",
                )
            )
    return cases


def wice_evidence(sentences: list[str]) -> str:
    """WiCE's evidence sentences as one text, as LLM-AggreFact joins them."""
    return " ".join(s.replace("(meta data) ", "") for s in sentences)


def wice_dev() -> list[Case]:
    """WiCE claim dev as LLM-AggreFact builds its test subset: the evidence sentences joined
    (their "(meta data) " prefixes removed), label 1 iff ``supported``."""
    cases = []
    with _open(SHARED_NLI / "wice" / "claim" / "dev.jsonl.xz") as handle:
        for n, line in enumerate(handle):
            row = json.loads(line)
            document = wice_evidence(row["evidence"])
            cases.append(
                Case(
                    f"wice-dev-{n}",
                    "wice-dev",
                    "en",
                    document,
                    row["claim"],
                    int(row["label"] == "supported"),
                    row["label"],
                    ambiguous=row["label"] == "partially_supported",
                )
            )
    return cases


def contrl() -> list[Case]:
    """ConTRoL dev: exam passages of 1.9k-2.9k characters; entailment against the rest."""
    rows = _json_lines(SHARED_NLI / "contrl" / "dev.jsonl.xz")
    return _sentence_pairs(rows, "contrl", "en", ("uid", "premise", "hypothesis", "label"), "e")


def mctest() -> list[Case]:
    """MCTest-NLI (DocNLI's whole children's stories, about 1k characters), every split."""
    return [
        case
        for path in sorted((SHARED_NLI / "docnli-aux" / "MCTest-NLI").iterdir())
        for case in _docnli_file(path, f"mctest-{path.name.split('.txt')[0]}", "mctest")
    ]


def summac() -> list[Case]:
    """SummaC's validation subsets (news articles and their summaries), without Polytope,
    whose labels are known to be noisy."""
    cases = []
    for name in ("factcc.json.xz", "summeval.json", "xsumfaith.json.xz"):
        with _open(SHARED_NLI / "summac-val-subsets" / name) as handle:
            rows = json.load(handle)
        for key, row in rows.items():
            cases.append(
                Case(
                    f"summac-{key}",
                    "summac",
                    "en",
                    row["document"],
                    row["claim"],
                    int(row["label"] == 1),
                    name.split(".")[0],
                )
            )
    return cases


def project_set(name: str, split: str | None = None) -> list[Case]:
    """The project's groundedness sets (``benchmarks/eval``); ``split`` picks the second
    set's train or test split."""
    cases = []
    with (EVAL / name).open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if split is not None and row.get("split") != split:
                continue
            cases.append(
                Case(
                    row["id"],
                    f"{name.split('.')[0]}-{split or 'all'}",
                    row["language"],
                    row["context"],
                    row["response"],
                    int(row["label"] == "grounded"),
                    row["category"],
                    ambiguous=not row["clear"],
                )
            )
    return cases


def _balanced(cases: list[Case], count: int, seed: int) -> list[Case]:
    """``count`` cases, half of each label where the set has enough, drawn with ``seed``."""
    rng = random.Random(seed)
    positives = [c for c in cases if c.label == 1]
    negatives = [c for c in cases if c.label == 0]
    rng.shuffle(positives)
    rng.shuffle(negatives)
    half = count // 2
    chosen = positives[:half] + negatives[: count - min(half, len(positives))]
    rng.shuffle(chosen)
    return chosen


def _sample(cases: list[Case], count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    chosen = list(cases)
    rng.shuffle(chosen)
    return chosen[:count]


#: The training pool: (name, how its cases are drawn). Sizes fit the collection's budget of
#: about an hour of the default model's prompt evaluation on 2 cores.
TRAINING: dict[str, Callable[[], list[Case]]] = {
    "mnli": lambda: _balanced(docnli("MNLI"), 400, SEED),
    "kornli-test": lambda: _balanced(kornli("test"), 400, SEED),
    "jsick": lambda: _balanced(jsick(), 350, SEED),
    "fever": lambda: _balanced(docnli("FEVER-NLI"), 300, SEED),
    "janli": lambda: _balanced(janli(), 200, SEED),
    "begin-v1": lambda: _balanced(begin_v1(), 150, SEED),
}

#: Where each training set comes from and under which licence (its folder's SOURCE.md), carried
#: into the record beside the shipped parameters.
LICENCES = {
    "mnli": "DocNLI binary-MNLI dev (BSD-3 repo; MNLI mostly OANC, free use)",
    "kornli-test": "KorNLI XNLI test, Korean (CC BY-SA 4.0)",
    "jsick": "JSICK train, Japanese (CC BY-SA 4.0)",
    "fever": "DocNLI binary-FEVER-NLI dev (BSD-3 repo; FEVER/Wikipedia CC BY-SA 3.0)",
    "janli": "JaNLI train, Japanese (CC BY-SA 4.0)",
    "begin-v1": "BEGIN v1 dev, Wizard of Wikipedia (CC BY 4.0)",
}

#: The measured sets, never trained on. The order is the collection's.
MEASURING: dict[str, Callable[[], list[Case]]] = {
    "v2-test": lambda: project_set("groundedness_v2.jsonl", "test"),
    "kornli-dev": lambda: _sample(kornli("dev"), 300, SEED),
    "jnli-valid": lambda: _sample(jnli(), 400, SEED),
    "wice-dev": lambda: _sample(wice_dev(), 349, SEED),
    "v2-train": lambda: project_set("groundedness_v2.jsonl", "train"),
    "begin-v2": lambda: _sample(begin_v2(), 200, SEED),
    "v1": lambda: project_set("groundedness.jsonl"),
}
