"""The requests of the same-answer replay (``benchmarks.determinism``) and how they are sent:
the probes (greedy answers with logprobs, groundedness checks), the mixed workload from
several clients, the clients sent beside the probes, and the seeded answer."""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

CHAT = "core-1-mini-chat"
#: A ``response_format`` schema of the workload's structured answers.
TOPIC_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "topic",
        "schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "facts": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["name", "facts"],
        },
    },
}
#: How long the clients sent beside the probes run before the first probe goes.
SETTLE_S = 0.2
logger = logging.getLogger(__name__)
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


#: The probes' questions, a pair per round of the eight topics: the first alone, the second
#: (naming the topic before it too) after a terse system message.
PROBE_QUESTIONS = [
    ("In one sentence, what is special about {t}?", "Name three facts about {t} and {u}."),
    ("What would a child ask about {t}?", "Compare {t} with {u} in two sentences."),
    ("Describe {t} to a visitor from another century.", "List two myths about {t} and {u}."),
]


def probe_requests(count: int = 20, max_tokens: int = 16) -> list[dict[str, Any]]:
    """``count`` greedy answers with logprobs (24 different ones, then the same again)."""
    requests = []
    for i in range(count):
        t, u = TOPICS[i % 8], TOPICS[i % 8 - 1]
        alone, terse = PROBE_QUESTIONS[i // 8 % len(PROBE_QUESTIONS)]
        messages = (
            [{"role": "user", "content": alone.format(t=t)}]
            if i % 2 == 0
            else [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": terse.format(t=t, u=u)},
            ]
        )
        requests.append(
            {
                "model": CHAT,
                "messages": messages,
                "temperature": 0,
                "max_tokens": max_tokens,
                "logprobs": True,
                "top_logprobs": 3,
            }
        )
    return requests


def probe_checks(count: int = 20) -> list[tuple[str, str]]:
    """``count`` groundedness checks (context, response) from the project's first set."""
    return [(case["context"], case["response"]) for case in _cases()[:count]]


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
            # Half JSON mode, half a schema (no draw of its own: the mix stays as it was).
            schema = TOPICS.index(topic) % 2
            body["response_format"] = TOPIC_SCHEMA if schema else {"type": "json_object"}
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
    """Send one workload item as its kind says (a stream closed after four chunks)."""
    if kind == "judge":
        backend.check_groundedness(body["context"], body["response"])
    elif kind == "cancel":
        with backend.stream_chat({**body, "stream": True}) as stream:
            for i, _ in enumerate(stream):
                if i >= 3:
                    break
    else:
        backend.chat(body)


def replay(backend, items, threads: int = 8, tolerate: bool = False) -> Counter[str]:
    """Send ``items`` from ``threads`` clients; with ``tolerate``, a failed request is counted
    (by kind, the first of each logged) instead of raised. Returns the failures."""
    from tqdm import tqdm

    failed: Counter[str] = Counter()
    with (
        ThreadPoolExecutor(threads) as pool,
        tqdm(
            total=len(items),
            desc="workload",
            disable=None,  # no bar without a terminal
        ) as bar,
    ):
        futures = [(kind, pool.submit(run_one, backend, kind, body)) for kind, body in items]
        for kind, future in futures:
            try:
                future.result()
            except Exception:
                if not tolerate:
                    raise
                if not failed[kind]:
                    logger.exception("a %s request failed", kind)
                failed[kind] += 1
            bar.update()
    return failed


class Beside:
    """``threads`` clients sending ``items`` in turn for as long as the block runs, so that
    what the block sends runs among them (none when ``threads`` is 0)."""

    def __init__(self, backend, items: list[tuple[str, Any]], threads: int) -> None:
        self.backend, self.items, self.threads = backend, items, threads
        self.sent = 0
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max(threads, 1))
        self._clients: list = []

    def __enter__(self) -> Beside:
        self._clients = [self._pool.submit(self._client, i) for i in range(self.threads)]
        if self.threads:
            time.sleep(SETTLE_S)
        return self

    def _client(self, index: int) -> int:
        sent = 0
        while not self._stop.is_set():
            kind, body = self.items[(index + sent * self.threads) % len(self.items)]
            run_one(self.backend, kind, body)
            sent += 1
        return sent

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.sent = sum(client.result() for client in self._clients)
        self._pool.shutdown()


def noise(count: int = 64, seed: int = 3) -> list[tuple[str, Any]]:
    """What the clients beside the probes send: the workload's kinds but checks."""
    return [(kind, body) for kind, body in workload(count, seed) if kind != "judge"]


#: The seeded answer repeated alone and among other requests.
SEEDED = {
    "model": CHAT,
    "messages": [{"role": "user", "content": "Write a short poem about the sea."}],
    "temperature": 0.7,
    "seed": 1234,
    "max_tokens": 24,
}


def seeded_answers(backend, beside: int, rounds: int = 20) -> list[str]:
    """The seeded answer at 0.7, ``rounds`` times, among ``beside`` clients (0: alone)."""
    with Beside(backend, noise(seed=7), beside):
        return [backend.chat(SEEDED).choices[0].message.content for _ in range(rounds)]


def tokens_per_second(backend, streams: int, new_tokens: int = 64) -> float:
    """Greedy tokens/s of ``streams`` requests at once, the better of two rounds."""
    body = {
        "model": CHAT,
        "messages": [{"role": "user", "content": "Describe a harbour at dawn in detail."}],
        "temperature": 0,
        "max_tokens": new_tokens,
    }
    rates = []
    for _ in range(2):
        started = time.perf_counter()
        with ThreadPoolExecutor(streams) as pool:
            answers = list(pool.map(lambda _: backend.chat(body), range(streams)))
        elapsed = time.perf_counter() - started
        rates.append(sum(a.usage.completion_tokens for a in answers) / elapsed)
    return max(rates)
