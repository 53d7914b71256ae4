"""Faults: a failing request fails alone, SIGTERM drains within its timeout, and the HTTP
client rides out a network that drops connections and a server answering 429 for a while.

Cited rather than repeated (``tests/server/``): a client dropping mid-stream stops generation
and frees its place (``test_server_streaming.py::test_a_client_disconnect_stops_generation_and_
frees_the_place``, and for stream slots ``test_operator_limits.py`` here); a basic SIGTERM
drain (``test_server_shutdown.py``); a server still loading answering 503 until the client's
retries get through (``test_http_client.py::test_retries_ride_out_a_server_that_is_still_
loading``); retry rules on scripted transports (``test_http_client.py``).
"""

from __future__ import annotations

import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from backend.backends.client.http import HTTPBackend
from backend.testing import EchoChatEngine, offline_backend
from backend.testing.servers import ServerProcess
from tests.reliability.dropping_proxy import DroppingProxy
from tests.reliability.wire import (
    AUTH,
    CHAT_PATH,
    chat_body,
    error_of,
    sse_payloads,
    streamed_text,
)
from tests.server.helpers import API_KEY, SlowChatEngine
from tests.waiting import wait_for

OOM = EchoChatEngine.OUT_OF_MEMORY


def _wait_running(http: httpx.Client, count: int) -> None:
    """Until the server's metrics show ``count`` model requests holding a place."""
    line = f"core_model_requests_running {float(count)}"
    wait_for(lambda: line in http.get("/metrics").text, "the requests' start")


def _ask(http: httpx.Client, content: str, stream: bool) -> tuple[int, str]:
    """(status, what came back: the content, or the error message of a body or last event)."""
    response = http.post(CHAT_PATH, json=chat_body(content, stream=stream))
    if response.status_code != 200:
        return response.status_code, error_of(response)["message"]
    if not stream:
        return 200, response.json()["choices"][0]["message"]["content"]
    payloads = sse_payloads(response.text.splitlines())
    if payloads[-1] != "[DONE]":
        return 200, payloads[-1]["error"]["message"]
    return 200, streamed_text(payloads)


def test_an_out_of_memory_error_fails_that_request_alone(serve):
    running = serve(offline_backend(EchoChatEngine(token_delay=0.005)), max_concurrent=8)
    asks = [(f"fine {i}", i % 2 == 0) for i in range(10)] + [(OOM, False), (OOM, True)]
    with httpx.Client(base_url=running.url, headers=AUTH, timeout=30) as http:
        with ThreadPoolExecutor(len(asks)) as pool:
            results = list(pool.map(lambda ask: _ask(http, *ask), asks))
        for (content, _), (status, text) in zip(asks, results, strict=True):
            if content == OOM:  # a 500, or an error event once the stream had begun
                assert status in (200, 500) and re.fullmatch(
                    r"internal server error \(request id [0-9a-f]{32}\)", text
                ), text
            else:
                assert (status, text) == (200, EchoChatEngine.reply_to(content))
        # the server lets go of a place after the response's last byte: wait for that state
        wait_for(
            lambda: running.context.limiter.active == 0 and running.context.streams.open == 0,
            "every place and stream slot freed",
        )
        assert http.get("/health").json()["ready"]
        assert _ask(http, "after", stream=True) == (200, "echo: after")


def test_sigterm_drains_in_flight_requests_while_new_ones_get_503(figures):
    in_flight = [(f"in flight {i} " + "x" * 30, i % 2 == 0) for i in range(6)]
    # ~50 tokens at 10 ms: half a second each, which the engine runs one at a time
    with (
        ServerProcess(
            fake="echo",
            token_delay=0.01,
            settings={"max_concurrent": 8, "shutdown_drain_timeout": 10},
            env={"OMP_NUM_THREADS": "1"},
        ) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as http,
        ThreadPoolExecutor(len(in_flight)) as pool,
    ):
        answers = [pool.submit(_ask, http, *ask) for ask in in_flight]
        _wait_running(http, len(in_flight))
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        wait_for(lambda: http.get("/ready").status_code == 503, "the signal's landing")
        status, message = _ask(http, "too late", stream=False)
        assert (status, message[:31]) == (503, "the server is shutting down; re")
        for (content, _), answer in zip(in_flight, answers, strict=True):
            assert answer.result() == (200, EchoChatEngine.reply_to(content))
        assert server.process.wait(15) == 0
        drained = time.monotonic() - signalled
    figures["shutdown drain seconds (6 in flight, ~0.5 s of generation each)"] = round(drained, 2)
    assert drained < 10


def test_a_request_still_running_at_the_drain_timeout_does_not_hold_shutdown(figures):
    with (
        ServerProcess(
            fake="echo",
            token_delay=0.5,
            settings={"shutdown_drain_timeout": 1},
            env={"OMP_NUM_THREADS": "1"},
        ) as server,
        httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as http,
        ThreadPoolExecutor(1) as pool,
    ):
        stuck = pool.submit(_ask, http, "a reply that takes half a minute " + "x" * 30, False)
        _wait_running(http, 1)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        status = server.process.wait(20)
        stopped = time.monotonic() - signalled
        assert status == 1  # it says it left model work unfinished
        figures["shutdown seconds with a stuck request (drain timeout 1 s)"] = round(stopped, 2)
        try:
            answered, _ = stuck.result()
        except httpx.TransportError:
            answered = None  # the connection closed under it: the client's to retry
        assert answered != 200
    assert stopped < 1 + 1 + 1.5  # drain timeout, a second for connections, slack


def test_the_client_rides_out_a_network_that_drops_connections(echo_server):
    for stream in (False, True):
        proxy = DroppingProxy(echo_server.url, drop=2)
        with proxy as url, HTTPBackend(url, api_key=API_KEY, max_retries=3) as client:
            request = chat_body("through a flaky network", stream=stream)
            if stream:
                text = "".join(
                    c.choices[0].delta.content or ""
                    for c in client.stream_chat(request)
                    if c.choices
                )
            else:
                text = client.chat(request).choices[0].message.content
        assert text == "echo: through a flaky network"
        assert proxy.accepted == 3  # two reset, the third served


def test_the_client_rides_out_a_spell_of_429s(serve):
    gate = threading.Event()
    running = serve(
        offline_backend(SlowChatEngine("done", gate=gate)),
        max_concurrent=1,
        max_queued=0,
        retry_after=1,
    )
    with (
        running.client(max_retries=0) as holder,
        running.client(max_retries=3) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        held = pool.submit(holder.chat, chat_body("holds the only place"))
        _wait_running(httpx.Client(base_url=running.url), 1)
        threading.Timer(0.5, gate.set).start()
        started = time.monotonic()
        assert client.chat(chat_body("waits its turn")).choices[0].message.content == "done"
        assert time.monotonic() - started >= 1.0  # honoured Retry-After: 1
        assert held.result().choices[0].message.content == "done"
    refused = running.context.metrics.requests.labels(
        method="POST", path=CHAT_PATH, status="429"
    )._value.get()
    assert refused >= 1
