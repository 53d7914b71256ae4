"""LangChain's JSON-mode request (``test_json_mode``), as ``with_structured_output(...,
method="json_mode")`` sends it (``response_format`` ``json_object``), at temperature 0.7 on
the small profile, once per seed: the answers without exactly the two asked keys, and those
that ended at a bound (``finish_reason`` "length").

python -m benchmarks.json_mode_seeds [--seeds 0:750] [--top-p 0.8] [--temperature 1.0]

``--top-p`` sends that nucleus (unset: the service's default, the whole distribution). One
seed takes about a second on 2 cores. The top_p 0.8 / top_k 20 figures of
benchmarks/README.md ("Sampling from the model's nucleus") came from commit cb88c10, which
also took ``top_k``; it was reverted.
"""

from __future__ import annotations

import argparse
import json
import statistics

from tqdm import tqdm

from benchmarks.sampled_structure import JOKE_REQUEST

KEYS = {"setup", "punchline"}
#: An answer longer than this (characters) is no two-sentence joke: a string that ran on.
LONG = 400


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:750", help="first:end (end excluded)")
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--temperature", type=float, default=0.7, help="the spec's default")
    args = parser.parse_args(argv)
    first, end = (int(part) for part in args.seeds.split(":"))

    from backend.backends.local import InProcessBackend

    sampling = {} if args.top_p is None else {"top_p": args.top_p}
    bad, cut, lengths = [], 0, []
    with InProcessBackend(profile="small") as backend:
        for seed in tqdm(range(first, end), desc="json mode"):
            choice = backend.chat(
                {
                    "model": "core-1-mini-chat",
                    "messages": [{"role": "user", "content": JOKE_REQUEST}],
                    "response_format": {"type": "json_object"},
                    "temperature": args.temperature,
                    "seed": seed,
                    **sampling,
                }
            ).choices[0]
            cut += choice.finish_reason == "length"
            lengths.append(len(choice.message.content))
            try:
                keys = set(json.loads(choice.message.content))
            except ValueError:
                keys = None
            if keys != KEYS:
                bad.append(seed)
                print(seed, choice.finish_reason, repr(choice.message.content[:300]), flush=True)
    label = "the service's top_p" if args.top_p is None else f"top_p {args.top_p}"
    print(f"{label}: {len(bad)} of {end - first} without exactly {sorted(KEYS)} {bad}; {cut} cut")
    tail = (
        statistics.quantiles(lengths, n=100, method="inclusive")[98]
        if len(lengths) > 1
        else lengths[0]
    )
    print(
        f"answer characters: median {statistics.median(lengths):.0f}, 99th percentile "
        f"{tail:.0f}, longest {max(lengths)}; {sum(n > LONG for n in lengths)} over {LONG}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
