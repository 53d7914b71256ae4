"""Same request, same answer: a probe set read on a fresh backend, then again after a long
mixed workload on the same backend (and again among concurrent requests), compared bit for bit.

python -m benchmarks.determinism [--profile small] [--requests 500] [--deterministic]

The workload mixes what a long-running server sees: short greedy and sampled answers, streams
closed after a few chunks, tool calls, JSON mode, groundedness checks on a long context, and
long prompts that fill the KV cache (the engine runs with a 2,048-token cache, so several
together set requests aside and resume them). Eight client threads send it. The probes are 20
greedy answers with their top log-probabilities and 20 groundedness checks with their support.
With ``--deterministic`` the engine runs each request alone (``CORE_DETERMINISTIC``) and the
probes are also sent among eight concurrent requests. Seeded answers at temperature 0.7 are
repeated alone and among eight. Tokens per second at 1 and 8 streams are printed for the
setting used, so two runs (with and without ``--deterministic``) give the cost.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

CHAT = "core-1-mini-chat"
#: The KV cache of the replay's engine: small enough that long prompts together fill it.
REPLAY_CONTEXT = 2048
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TOPICS = ["harbours", "bread", "volcanoes", "chess", "bees", "trains", "glaciers", "tea"]
CITIES = ["Oslo", "Busan", "Kyoto", "Lima", "Porto", "Cairo"]
GROUNDEDNESS = Path(__file__).parent / "eval" / "groundedness.jsonl"


def _cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in GROUNDEDNESS.read_text().splitlines() if line.strip()]


def probe_requests() -> list[dict[str, Any]]:
    """20 greedy answers with logprobs."""
    return [
        {
            "model": CHAT,
            "messages": [
                {"role": "user", "content": f"In one sentence, what is special about {t}?"}
            ]
            if i % 2 == 0
            else [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": f"Name three facts about {t} and {TOPICS[i % 8 - 1]}."},
            ],
            "temperature": 0,
            "max_tokens": 16,
            "logprobs": True,
            "top_logprobs": 3,
        }
        for i, t in enumerate(TOPICS * 3)
    ][:20]


def probe_checks() -> list[tuple[str, str]]:
    """20 groundedness checks (context, response) from the project's first set."""
    return [(case["context"], case["response"]) for case in _cases()[:20]]


def read_probes(backend, requests, checks) -> list[Any]:
    """Each probe's tokens and logprobs, and each check's verdict and support."""
    out: list[Any] = []
    for request in requests:
        answer = backend.chat(request)
        choice = answer.choices[0]
        entries = [
            (e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs])
            for e in choice.logprobs.content
        ]
        out.append((choice.message.content, entries))
    for context, response in checks:
        result = backend.check_groundedness(context, response)
        out.append((result.verdict, result.support))
    return out


def workload(count: int, seed: int = 0) -> list[tuple[str, Any]]:
    """``count`` mixed requests, drawn with a fixed seed."""
    rng = random.Random(seed)
    cases = _cases()
    long_context = " ".join(case["context"] for case in cases[:6])
    items: list[tuple[str, Any]] = []
    for _ in range(count):
        kind = rng.choices(
            ["chat", "sampled", "cancel", "tools", "json", "judge", "long"],
            weights=[5, 4, 3, 2, 2, 1, 1],
        )[0]
        topic = rng.choice(TOPICS)
        body: dict[str, Any] = {
            "model": CHAT,
            "messages": [{"role": "user", "content": f"Tell me about {topic}."}],
            "max_tokens": rng.randint(4, 24),
            "temperature": 0.0 if kind == "chat" else 0.7,
        }
        if kind == "tools":
            city = rng.choice(CITIES)
            body["messages"] = [{"role": "user", "content": f"What is the weather in {city}?"}]
            body["tools"] = [WEATHER_TOOL]
            body["max_tokens"] = 48
        elif kind == "json":
            body["messages"] = [
                {"role": "user", "content": f"Give a JSON object describing {topic}."}
            ]
            body["response_format"] = {"type": "json_object"}
            body["max_tokens"] = 48
        elif kind == "judge":
            case = rng.choice(cases)
            body = {"context": long_context, "response": case["response"]}
        elif kind == "long":
            body["messages"] = [
                {
                    "role": "user",
                    "content": long_context + f"\n\nSummarise the above about {topic}.",
                }
            ]
            body["max_tokens"] = 32
        items.append((kind, body))
    return items


def run_one(backend, kind: str, body: Any) -> None:
    if kind == "judge":
        backend.check_groundedness(body["context"], body["response"])
    elif kind == "cancel":
        with backend.stream_chat({**body, "stream": True}) as stream:
            for i, _ in enumerate(stream):
                if i >= 3:
                    break
    else:
        backend.chat(body)


def replay(backend, items, threads: int = 8) -> None:
    from tqdm import tqdm

    with ThreadPoolExecutor(threads) as pool, tqdm(total=len(items), desc="workload") as bar:
        for future in [pool.submit(run_one, backend, kind, body) for kind, body in items]:
            future.result()
            bar.update()


def seeded_tokens(backend, beside: int) -> list[str]:
    """A seeded answer at 0.7, alone or among ``beside`` other requests, 20 times."""
    seeded = {
        "model": CHAT,
        "messages": [{"role": "user", "content": "Write a short poem about the sea."}],
        "temperature": 0.7,
        "seed": 1234,
        "max_tokens": 24,
    }
    answers = []
    others = [body for kind, body in workload(beside * 20, seed=7) if kind in ("chat", "sampled")]
    for round_ in range(20):
        with ThreadPoolExecutor(beside + 1) as pool:
            noise = [pool.submit(backend.chat, body) for body in others[round_ * beside :][:beside]]
            answers.append(backend.chat(seeded).choices[0].message.content)
            for future in noise:
                future.result()
    return answers


def tokens_per_second(backend, streams: int) -> float:
    body = {
        "model": CHAT,
        "messages": [{"role": "user", "content": "Describe a harbour at dawn in detail."}],
        "temperature": 0,
        "max_tokens": 64,
    }
    started = time.perf_counter()
    with ThreadPoolExecutor(streams) as pool:
        answers = list(pool.map(lambda _: backend.chat(body), range(streams)))
    elapsed = time.perf_counter() - started
    return sum(a.usage.completion_tokens for a in answers) / elapsed


def compare(before: list[Any], after: list[Any], label: str) -> bool:
    same = [a == b for a, b in zip(before, after, strict=True)]
    answers, checks = same[:20], same[20:]
    print(f"{label}: {sum(answers)}/20 answers and {sum(checks)}/20 checks bitwise identical")
    for i, (a, b) in enumerate(zip(before, after, strict=True)):
        if a != b and i >= 20:
            print(f"  check {i - 20}: {a} -> {b}")
    return all(same)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["default", "small"], default="small")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--deterministic", action="store_true")
    args = parser.parse_args(argv)

    from backend.backends.local import InProcessBackend
    from backend.backends.local.config import PROFILE_CHAT_MODELS
    from backend.engines.loader import load_chat_engine

    engine = load_chat_engine(
        PROFILE_CHAT_MODELS[args.profile],
        "llama.cpp",
        max_context=REPLAY_CONTEXT,
        deterministic=args.deterministic,
    )
    backend = InProcessBackend(profile=args.profile, chat_engine_instance=engine)
    requests, checks = probe_requests(), probe_checks()
    started = time.perf_counter()
    fresh = read_probes(backend, requests, checks)
    print(f"probes on the fresh backend: {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    replay(backend, workload(args.requests))
    print(
        f"workload: {args.requests} requests in {time.perf_counter() - started:.0f} s, "
        f"{engine._runner.preemptions} set aside for lack of cache, "
        f"largest decode batch {engine._runner.largest_decode_batch}",
        flush=True,
    )
    compare(fresh, read_probes(backend, requests, checks), "after the workload")
    if args.deterministic:
        noise = [body for kind, body in workload(64, seed=3) if kind != "judge"][:8]
        with ThreadPoolExecutor(8) as pool:
            running = [pool.submit(run_one, backend, "chat", body) for body in noise * 3]
            among = read_probes(backend, requests, checks)
            for future in running:
                future.result()
        compare(fresh, among, "among 8 concurrent requests")
    alone = seeded_tokens(backend, 0)
    print(f"seeded at 0.7, alone: {alone.count(alone[0])}/20 identical")
    among8 = seeded_tokens(backend, 8)
    print(f"seeded at 0.7, among 8: {among8.count(alone[0])}/20 identical to alone")
    for streams in (1, 8):
        print(f"tokens/s at {streams} streams: {tokens_per_second(backend, streams):.1f}")
    started = time.perf_counter()
    for context, response in checks[:10]:
        backend.check_groundedness(context, response)
    print(f"judge: {(time.perf_counter() - started) / 10:.2f} s per short check")
    backend.close()
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
