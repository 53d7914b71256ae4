"""Which reader the judge gets (issue 49): the same sets judged by each reader, in one run.

The service's own groundedness check (``Backend.check_groundedness``, in process, the
calibrated thresholds and early stop of each reader) on the first pairs of each measured set
(``datasets.MEASURING``: seeded samples, so the first pairs are a random subset), once per
reader:

- ``llama.cpp``: the chat engine reads (``CORE_GROUNDEDNESS_ENGINE=chat``, the default on
  every CPU): the 4-bit model through llama.cpp, with the learned reading where one ships.
- ``copy``: the bf16 transformers copy (``CORE_GROUNDEDNESS_ENGINE=transformers``, opt-in):
  P(yes) at that reader's own thresholds.

Each set is judged by one reader, then the other (both stay loaded). Rows are appended to
``benchmarks/judge/.features/readers/<profile>-<reader>-<set>.jsonl`` (git-ignored), so a run
resumes where it stopped; the figures are printed at the end and written to
``benchmarks/judge/results-readers-<profile>.json``.

    python -m benchmarks.judge.readers --limit v1:40,v2-test:30,wice-dev:16
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Iterable

from tqdm import tqdm

from benchmarks.judge.collect import FEATURES
from benchmarks.judge.datasets import MEASURING, ROOT, Case
from benchmarks.judge.evaluate import figures_of

#: Reader name -> the ``groundedness_engine`` setting that gives it.
READERS = {"llama.cpp": "chat", "copy": "transformers"}
DEFAULT_SETS = "v1,v2-test,wice-dev,kornli-dev,jnli-valid"


def rows_path(profile: str, reader: str, name: str):
    return FEATURES / "readers" / f"{profile}-{reader}-{name}.jsonl"


def judge_all(
    profile: str, readers: list[str], sets: dict[str, list[Case]]
) -> dict[str, dict[str, list[dict]]]:
    """Each set's rows judged by each reader, set by set (so a run cut short has both readers'
    figures for the sets it finished), resuming from the rows already written."""
    from backend.backends.local import InProcessBackend

    services: dict[str, InProcessBackend] = {}
    judged: dict[str, dict[str, list[dict]]] = {reader: {} for reader in readers}
    try:
        for name, cases in sets.items():
            for reader in readers:
                path = rows_path(profile, reader, name)
                path.parent.mkdir(parents=True, exist_ok=True)
                rows = [json.loads(line) for line in path.open()] if path.exists() else []
                done = {row["id"] for row in rows}
                todo = [case for case in cases if case.id not in done]
                if todo and reader not in services:
                    engine = READERS[reader]
                    services[reader] = InProcessBackend(profile=profile, groundedness_engine=engine)
                    services[reader].warmup()
                for case in tqdm(todo, desc=f"{reader} {name}", unit="check"):
                    rows.append(judged_row(services[reader], case))
                    with path.open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps(rows[-1], ensure_ascii=False) + "\n")
                wanted = {case.id for case in cases}
                judged[reader][name] = [row for row in rows if row["id"] in wanted]
    finally:
        for service in services.values():
            service.close()
    return judged


def judged_row(service, case: Case) -> dict:
    started = time.perf_counter()
    result = service.check_groundedness(case.document, case.claim)
    return {
        "id": case.id,
        "label": case.label,
        "ambiguous": case.ambiguous,
        "language": case.language,
        "verdict": result.verdict,
        "support": result.support,
        "seconds": round(time.perf_counter() - started, 3),
    }


def figures(rows: Iterable[dict]) -> dict:
    """Balanced accuracy of the clear pairs, and of all pairs with the ambiguous ones counted
    not grounded (LLM-AggreFact's construction of WiCE), and seconds per check."""
    rows = list(rows)
    clear = [(r["label"], r["verdict"] == "grounded") for r in rows if not r["ambiguous"]]
    everything = [(r["label"], r["verdict"] == "grounded") for r in rows]
    seconds = sorted(r["seconds"] for r in rows)
    return {
        "clear": figures_of(clear) if clear else None,
        "all_with_ambiguous": figures_of(everything),
        "not_sure": sum(r["verdict"] == "notSure" for r in rows),
        "seconds_per_check": round(sum(seconds) / len(seconds), 2),
        "seconds_median": seconds[len(seconds) // 2],
    }


def agreement(first: list[dict], second: list[dict]) -> float:
    """The share of pairs both readers gave the same verdict."""
    theirs = {row["id"]: row["verdict"] for row in second}
    same = [row["verdict"] == theirs[row["id"]] for row in first if row["id"] in theirs]
    return round(sum(same) / len(same), 3) if same else float("nan")


def limit_of(limits: str, name: str) -> int | None:
    """The limit ``--limit`` gives set ``name``: one number for every set, or per set."""
    if not limits:
        return None
    if ":" not in limits:
        return int(limits)
    given = dict(item.split(":") for item in limits.split(","))
    return int(given[name]) if name in given else None


def cpu_name() -> str:
    """The CPU's model name, and whether it has AMX (the copy's reason to exist)."""
    try:
        info = open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return platform.machine()
    name = next(
        (
            line.split(":", 1)[1].strip()
            for line in info.splitlines()
            if line.startswith("model name")
        ),
        platform.machine(),
    )
    return f"{name} ({'with' if 'amx_tile' in info else 'no'} AMX)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="default", choices=["default", "small"])
    parser.add_argument("--sets", default=DEFAULT_SETS, help=f"of {', '.join(MEASURING)}")
    parser.add_argument("--limit", default="", help="first pairs of each set: N, or name:N,name:N")
    parser.add_argument("--readers", default=",".join(READERS), help="of llama.cpp, copy")
    args = parser.parse_args()
    sets = {name: MEASURING[name]()[: limit_of(args.limit, name)] for name in args.sets.split(",")}
    judged = judge_all(args.profile, args.readers.split(","), sets)
    results: dict = {"cpu": cpu_name(), "sets": {}}
    for name in sets:
        entry = {reader: figures(judged[reader][name]) for reader in judged}
        if len(judged) == 2:
            entry["same_verdict"] = agreement(*(judged[reader][name] for reader in judged))
        results["sets"][name] = entry
        line = "  ".join(
            f"{reader} {entry[reader]['all_with_ambiguous']['bacc']} "
            f"({entry[reader]['seconds_per_check']} s)"
            for reader in judged
        )
        print(f"{name} ({len(judged[next(iter(judged))][name])}): {line}", flush=True)
    path = ROOT / "benchmarks" / "judge" / f"results-readers-{args.profile}.json"
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
