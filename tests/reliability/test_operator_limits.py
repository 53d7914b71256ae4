"""The limits an operator sets (``CORE_SERVER_*``): messages per request and concurrent streams.

Cited rather than repeated (``tests/server/``): body size (413) in ``test_server_errors.py::
test_body_over_the_declared_limit_is_413``, queue length (429 with ``Retry-After``) in
``...::test_a_full_queue_answers_429_with_retry_after``, the per-request timeout (504) in
``...::test_a_request_past_the_timeout_is_504_and_keeps_its_place_until_the_model_stops``,
concurrent model requests in ``test_server_streaming.py::test_a_client_disconnect_stops_
generation_and_frees_the_place``, and reading the others from the environment in
``test_server_settings.py``.
"""

from __future__ import annotations

import contextlib

import httpx
import pytest

from backend.server.settings import ServerSettings
from backend.testing import EchoChatEngine, offline_backend
from tests.reliability.wire import AUTH, CHAT_PATH, chat_body, error_of, sse_payloads, streamed_text
from tests.waiting import wait_for


def test_messages_per_request_are_capped(serve):
    running = serve(offline_backend(EchoChatEngine()), max_messages=3)
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        three = chat_body("hi", messages=[{"role": "user", "content": "hi"}] * 3)
        assert http.post(CHAT_PATH, json=three).status_code == 200
        four = {**three, "messages": three["messages"] + [{"role": "bogus"}]}  # not validated
        response = http.post(CHAT_PATH, json=four)
    assert response.status_code == 400
    assert error_of(response)["message"] == (
        "invalid request: messages holds 4 messages; this server accepts at most 3 per request"
    )


def test_concurrent_streams_are_capped_and_a_dropped_stream_frees_its_slot(serve):
    engine = EchoChatEngine(token_delay=0.05, context_length=16384)
    running = serve(offline_backend(engine), max_concurrent_streams=2)
    # Five minutes of tokens each: both streams are still open when the third one is sent,
    # however loaded the machine; they end when their clients leave.
    long = chat_body("x" * 6000, stream=True)
    with httpx.Client(base_url=running.url, headers=AUTH, timeout=30) as http:
        with contextlib.ExitStack() as open_streams:
            for _ in range(2):
                response = open_streams.enter_context(http.stream("POST", CHAT_PATH, json=long))
                assert response.status_code == 200
                next(response.iter_lines())  # the stream has begun
            refused = http.post(CHAT_PATH, json=chat_body("one too many", stream=True))
            assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
            assert error_of(refused)["message"].startswith("too many streams: 2 are open")
        # both clients went away mid-stream: their slots and model places come back
        wait_for(
            lambda: not (running.context.streams.open or running.context.limiter.active),
            "the dropped streams' slots",
        )
        response = http.post(CHAT_PATH, json=chat_body("my turn", stream=True))
        assert streamed_text(sse_payloads(response.text.splitlines())) == "echo: my turn"


def test_the_new_limits_come_from_the_environment():
    env = {"CORE_SERVER_MAX_MESSAGES": "10", "CORE_SERVER_MAX_CONCURRENT_STREAMS": "3"}
    settings = ServerSettings.from_env(env=env)
    assert (settings.max_messages, settings.max_concurrent_streams) == (10, 3)
    defaults = ServerSettings.from_env(env={})
    assert (defaults.max_messages, defaults.max_concurrent_streams) == (2048, 32)


@pytest.mark.parametrize("name", ["MAX_MESSAGES", "MAX_CONCURRENT_STREAMS"])
@pytest.mark.parametrize(
    ("value", "message"), [("0", "must be at least 1"), ("lots", "must be a number")]
)
def test_bad_limit_values_are_refused(name, value, message):
    with pytest.raises(ValueError, match=message):
        ServerSettings.from_env(env={f"CORE_SERVER_{name}": value})
