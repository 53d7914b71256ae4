"""The engine backend against the in-process one on the same weights, and the gateway's cost.

    .venv/bin/python -m benchmarks.engine_backend [--pairs 20] [--requests 20]

Starts llama-cpp-python's server on the embedded small GGUF and the e5 embeddings stand-in
(``backend.testing.engine_servers``), then reports:

* P(yes) of every judge reading of the ``--pairs`` shortest groundedness pairs, read from the
  engine's ``top_logprobs`` and in-process: the largest gap with nothing cached on either side
  (``p_yes_gaps_from_clean_caches``), and the largest and median gaps as served, each reader
  reusing what its cache holds;
* the verdicts of those pairs both ways: how many are equal;
* the gateway's added latency: the median of ``--requests`` one-token chat completions sent to
  the engine directly and through this project's server in front of it (baseline: direct).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import httpx

from backend.backends.local import InProcessBackend
from backend.backends.remote_engine import EngineBackend
from backend.backends.remote_engine.api import EngineAPI
from backend.backends.remote_engine.judge_reading import EngineYesNoReading, embedded_chat_tokenizer
from backend.chat.yes_no import YesNoReader
from backend.groundedness.prompts import QUESTIONS, judge_prompt
from backend.testing.engine_servers import (
    embeddings_engine,
    llama_cpp_engine,
    p_yes_check,
    p_yes_gaps_from_clean_caches,
)
from backend.testing.servers import TEST_API_KEY, running_server
from benchmarks.eval.run_eval import load_jsonl


def _median_ms(send: Callable[[], object], requests: int) -> float:
    send()  # warm: connections open, the prompt cached alike both ways
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        send()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args(argv)
    cases = sorted(load_jsonl("groundedness.jsonl"), key=lambda c: len(c["context"]))
    cases = cases[: args.pairs]
    local = InProcessBackend(profile="small")
    with llama_cpp_engine("small") as chat, embeddings_engine() as pooling:
        remote = EngineBackend(
            engine_url=chat.url,
            chat_model=chat.model,
            embeddings_url=pooling.url,
            embedding_model=pooling.model,
            judge_calibration="small",
        )
        local_reader = YesNoReader(local.judge_reader().engine)
        api = EngineAPI(chat.url, None, 600.0, 0)
        remote_reader = EngineYesNoReading(api, chat.model, embedded_chat_tokenizer("small"))
        conversations = [
            judge_prompt(case["context"], case["response"], question)
            for case in cases
            for question in QUESTIONS.values()
        ]
        clean = p_yes_gaps_from_clean_caches(chat, conversations)
        gaps = [abs(local_reader.read(c)[0] - remote_reader.read(c)[0]) for c in conversations]
        same = 0
        local_check, _ = p_yes_check(local)  # the reading an engine's logprobs allow
        for case in cases:
            a = remote.check_groundedness(case["context"], case["response"]).verdict
            b = local_check(case["context"], case["response"]).verdict
            same += a == b
        body = {
            "model": chat.model,
            "messages": [{"role": "user", "content": "Say yes."}],
            "max_tokens": 1,
            "temperature": 0,
        }
        with running_server(remote) as gateway, httpx.Client(timeout=60) as client:
            direct = _median_ms(
                lambda: client.post(f"{chat.url}/chat/completions", json=body), args.requests
            )
            through = _median_ms(
                lambda: client.post(
                    f"{gateway.url}/v1/core/chat/completions",
                    json={**body, "model": "core-1-mini-chat"},
                    headers={"Authorization": f"Bearer {TEST_API_KEY}"},
                ),
                args.requests,
            )
        remote.close()
    local.close()
    report = {
        "pairs": len(cases),
        "readings": len(gaps),
        "p_yes_clean_max_gap": round(max(clean), 5),
        "p_yes_max_gap": round(max(gaps), 4),
        "p_yes_median_gap": round(statistics.median(gaps), 4),
        "readings_within_0.02": sum(g <= 0.02 for g in gaps),
        "verdicts_equal": same,
        "direct_median_ms": round(direct, 1),
        "gateway_median_ms": round(through, 1),
        "gateway_added_ms": round(through - direct, 1),
        "gateway_vs_direct": round(through / direct, 2),
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
