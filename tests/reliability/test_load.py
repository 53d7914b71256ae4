"""Load: 200 mixed requests from 32 concurrent clients against a server with small limits.

Every answer is its own request's correct answer (checked against the request: the echo fakes
answer from it, so a cross-wired response cannot pass) or a 429 with ``Retry-After``, which the
client honours before trying again (at most ``ATTEMPTS`` tries); the server's memory stays
bounded and it is healthy and idle afterwards.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest

from backend.testing import EchoChatEngine, offline_backend
from backend.testing.servers import ServerProcess
from tests.reliability.wire import (
    AUTH,
    CHAT_PATH,
    EMBED_PATH,
    chat_body,
    error_of,
    sse_payloads,
    streamed_text,
)

REQUESTS = 200
CLIENTS = 32
#: Tries per request: a 429 is retried after its ``Retry-After``, as a well-behaved client does.
ATTEMPTS = 4
KINDS = ("chat", "stream", "groundedness", "embeddings")
LIMITS = {"max_concurrent": 4, "max_queued": 16, "max_concurrent_streams": 8, "retry_after": 1}
#: Growth of the server's resident memory under load that still counts as bounded.
MEMORY_BOUND = 150 * 2**20


class Mix:
    """The requests of the load test and the answer each must get; ``check`` grades one."""

    def __init__(self) -> None:
        self.reference = offline_backend(EchoChatEngine())  # same fakes, in-process, for vectors

    def request(self, i: int) -> tuple[str, str, dict[str, Any]]:
        kind, token = KINDS[i % len(KINDS)], f"r{i:03d}-{uuid.uuid4().hex[:8]}"
        if kind == "chat":
            return kind, CHAT_PATH, chat_body(f"ask {token}")
        if kind == "stream":
            return kind, CHAT_PATH, chat_body(f"stream {token}", stream=True)
        if kind == "groundedness":
            claim = f"Ticket {token} is open." if i % 8 < 4 else f"Ticket {token} is closed."
            return (
                kind,
                CHAT_PATH,
                {
                    "model": "core-1-mini-groundedness-check",
                    "messages": [
                        {"role": "user", "content": f"Ticket {token} is open."},
                        {"role": "assistant", "content": claim},
                    ],
                },
            )
        return (
            kind,
            EMBED_PATH,
            {
                "model": "core-embedding-1-large-passage",
                "input": [f"{token} alpha", f"{token} beta"],
            },
        )

    def expected(self, kind: str, body: dict[str, Any]) -> Any:
        if kind in ("chat", "stream"):
            return EchoChatEngine.reply_to(body["messages"][0]["content"])
        if kind == "groundedness":
            context, claim = (m["content"] for m in body["messages"])
            return "grounded" if claim in context else "notGrounded"
        return [item.embedding for item in self.reference.embed(body).data]

    def answer(self, kind: str, response: httpx.Response) -> Any:
        if kind == "stream":
            return streamed_text(sse_payloads(response.text.splitlines()))
        if kind == "embeddings":
            return [item["embedding"] for item in response.json()["data"]]
        return response.json()["choices"][0]["message"]["content"]

    def correct(self, kind: str, body: dict[str, Any], response: httpx.Response) -> bool:
        expected, got = self.expected(kind, body), self.answer(kind, response)
        if kind == "embeddings":
            return len(got) == len(expected) and all(
                np.allclose(g, e, atol=1e-6) for g, e in zip(got, expected, strict=True)
            )
        return got == expected


class MemoryWatch(threading.Thread):
    """Samples the server's resident memory until stopped; ``peak`` in bytes."""

    def __init__(self, server: ServerProcess) -> None:
        super().__init__(daemon=True)
        self.server, self.peak, self.done = server, server.rss, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, self.server.rss)


@pytest.fixture(scope="module")
def server():
    with ServerProcess(
        fake="echo", token_delay=0.001, settings=LIMITS, env={"OMP_NUM_THREADS": "1"}
    ) as running:
        yield running


def test_every_request_gets_its_own_answer_or_a_429(server, figures):
    mix = Mix()
    outcomes: Counter[str] = Counter()
    wrong: list[str] = []
    with httpx.Client(
        base_url=server.url, headers=AUTH, timeout=60, limits=httpx.Limits(max_connections=CLIENTS)
    ) as http:
        for i in range(8):  # warm: the first requests of a process allocate for good
            kind, path, body = mix.request(i)
            assert http.post(path, json=body).status_code == 200
        baseline = server.rss
        watch = MemoryWatch(server)
        watch.start()

        def one(i: int) -> None:
            kind, path, body = mix.request(i)
            for _ in range(ATTEMPTS):
                response = http.post(path, json=body)
                if response.status_code != 429:
                    break
                retry_after = int(response.headers["retry-after"])
                assert retry_after >= 1 and error_of(response)["type"] == "rate_limit_error"
                outcomes["429"] += 1
                time.sleep(retry_after)
            else:
                outcomes["gave up after 429s"] += 1
                return
            if response.status_code == 200 and mix.correct(kind, body, response):
                outcomes[f"{kind} answered"] += 1
            else:
                wrong.append(f"{kind} {response.status_code} {response.text[:200]}")

        started = time.monotonic()
        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(one, range(REQUESTS)))
        watch.done.set()
        watch.join()

        answered = sum(n for k, n in outcomes.items() if k.endswith("answered"))
        elapsed = time.monotonic() - started
        figures.update(
            {
                "load seconds": round(elapsed, 1),
                "load requests": REQUESTS,
                "load concurrency": CLIENTS,
                "load answered": answered,
                "load 429s": outcomes["429"],
                "load gave up": outcomes["gave up after 429s"],
                "load wrong answers": len(wrong),
                "load answered by kind": {
                    k: n for k, n in sorted(outcomes.items()) if "answered" in k
                },
                "load server RSS MiB (baseline, peak)": (
                    round(baseline / 2**20, 1),
                    round(watch.peak / 2**20, 1),
                ),
            }
        )
        assert not wrong, wrong[:5]
        # a client may give up after ATTEMPTS 429s in a row, but only rarely
        assert outcomes["gave up after 429s"] <= REQUESTS // 20, outcomes
        assert all(outcomes[f"{kind} answered"] for kind in KINDS), outcomes
        assert watch.peak - baseline < MEMORY_BOUND

        # healthy and idle afterwards: ready, no place held, and it answers
        assert http.get("/health").json() == {"status": "ok", "ready": True}
        metrics = http.get("/metrics").text
        assert "core_model_requests_running 0.0" in metrics
        assert "core_model_requests_queued 0.0" in metrics
        kind, path, body = mix.request(REQUESTS)
        response = http.post(path, json=body)
        assert response.status_code == 200 and mix.correct(kind, body, response)
