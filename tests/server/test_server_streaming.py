"""Server-sent chat streams: the wire format, keep-alives, errors after the first byte, client
disconnects stopping generation, and draining on shutdown."""

from __future__ import annotations

import json
import signal
import threading

import httpx
import pytest

from backend.protocol.errors import APIConnectionError, InternalServerError, ServiceUnavailableError
from backend.testing import offline_backend
from tests.server.helpers import API_KEY, SlowChatEngine
from tests.waiting import wait_for

AUTH = {"Authorization": f"Bearer {API_KEY}"}
CHAT = {
    "model": "core-1-mini-chat",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
}


def _raw_stream(url: str, body: dict) -> tuple[httpx.Response, str]:
    with httpx.stream(
        "POST", f"{url}/v1/core/chat/completions", json=body, headers=AUTH, timeout=30
    ) as response:
        return response, response.read().decode()


@pytest.mark.parametrize("include_usage", [False, True])
def test_wire_format_data_events_then_done(fake_server, include_usage):
    body = {**CHAT, "stream_options": {"include_usage": include_usage}}
    response, text = _raw_stream(fake_server.url, body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    events = text.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert all(e.startswith("data: {") for e in events[:-2])
    assert {(c["id"], c["created"]) for c in chunks} == {(chunks[0]["id"], chunks[0]["created"])}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"]["content"] or "" for c in chunks if c["choices"]) == (
        "Hello there."
    )
    usage_chunks = [c for c in chunks if c["usage"] is not None]
    if include_usage:
        assert usage_chunks == [chunks[-1]] and chunks[-1]["choices"] == []
        assert chunks[-1]["usage"]["completion_tokens"] == 13
    else:
        assert usage_chunks == []  # the server counts tokens but does not send them
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_keep_alive_comments_while_waiting_for_the_first_token(serve):
    engine = SlowChatEngine("Hi", first_delay=0.6)
    running = serve(offline_backend(engine), keep_alive_interval=0.1)
    _, text = _raw_stream(running.url, CHAT)
    assert text.startswith("data: {")  # the role chunk goes out before the model starts
    first_content = text.index('"content":"H"')
    keep_alives = text[:first_content].count(": keep-alive\n\n")
    assert keep_alives >= 2  # about 6 expected; loose for loaded machines
    with running.client() as client:  # the client skips them
        chunks = client.stream_chat(CHAT)
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Hi"


def test_an_error_after_the_first_byte_is_one_error_event(serve):
    running = serve(offline_backend(SlowChatEngine("Hello world", fail_after=3)))
    response, text = _raw_stream(running.url, CHAT)
    assert response.status_code == 200
    events = [e for e in text.split("\n\n") if e]
    *chunks, last = events
    assert len(chunks) == 4  # the role chunk and three tokens
    request_id = response.headers["x-request-id"]
    assert json.loads(last.removeprefix("data: ")) == {
        "error": {
            "message": f"internal server error (request id {request_id})",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    assert "[DONE]" not in text and "secret" not in text


def test_the_client_raises_the_error_event_after_the_chunks_before_it(serve):
    engine = SlowChatEngine("Hello world", fail_after=3)
    running = serve(offline_backend(engine))
    received = []
    with running.client(max_retries=2) as client:
        stream = client.stream_chat(CHAT)
        with pytest.raises(InternalServerError, match="internal server error"):
            for chunk in stream:
                received.append(chunk.choices[0].delta.content)
    assert received == ["", "H", "e", "l"]
    assert len(engine.prompts) == 1  # one attempt: a started stream is never retried


async def test_the_async_client_raises_the_error_event(serve):
    running = serve(offline_backend(SlowChatEngine("Hello world", fail_after=3)))
    client = running.client()
    try:
        stream = await client.astream_chat(CHAT)
        received = []
        with pytest.raises(InternalServerError):
            async for chunk in stream:
                received.append(chunk.choices[0].delta.content)
        assert received == ["", "H", "e", "l"]
    finally:
        await client.aclose()


def _disconnect_after(url: str, chunks: int) -> None:
    with httpx.stream(
        "POST", f"{url}/v1/core/chat/completions", json=CHAT, headers=AUTH, timeout=30
    ) as response:
        lines = response.iter_lines()
        seen = 0
        while seen < chunks:
            if next(lines).startswith("data: "):
                seen += 1
    # leaving the block closes the connection mid-stream


def test_a_client_disconnect_stops_generation_and_frees_the_place(serve):
    engine = SlowChatEngine("x" * 2000, hold_after=100)
    running = serve(offline_backend(engine), max_concurrent=1, max_queued=0)
    _disconnect_after(running.url, chunks=10)
    # the engine holds after 100 tokens until it is stopped: it ends early only if stopped
    wait_for(engine.finished.is_set, "the end of generation")
    assert engine.generated <= 100
    wait_for(lambda: running.context.limiter.active == 0, "the freed place")
    # the freed place serves the next request (max_queued=0: a leaked place would be a 429)
    engine.reply = "ok"
    with running.client(max_retries=0) as client:
        assert client.chat({**CHAT, "stream": False}).choices[0].message.content == "ok"


async def test_closing_the_async_client_stream_stops_generation(serve):
    engine = SlowChatEngine("x" * 2000, hold_after=100)
    running = serve(offline_backend(engine))
    client = running.client()
    try:
        stream = await client.astream_chat(CHAT)
        for _ in range(5):
            await anext(stream)
        await stream.aclose()
    finally:
        await client.aclose()
    # the engine holds after 100 tokens until it is stopped: it ends early only if stopped
    wait_for(engine.finished.is_set, "the end of generation")
    assert engine.generated <= 100


def test_shutdown_drains_in_flight_streams_and_refuses_new_requests(serve):
    gate = threading.Event()
    engine = SlowChatEngine("Hello", gate=gate)
    running = serve(offline_backend(engine), shutdown_drain_timeout=10)
    client = running.client(max_retries=0)
    stream = client.stream_chat(CHAT)  # the response began; the model waits at the gate
    assert next(stream).choices[0].delta.role == "assistant"
    running.server.handle_exit(signal.SIGTERM, None)
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        response = http.post(
            "/v1/core/embeddings", json={"model": "core-embedding-1-large-query", "input": "x"}
        )
        assert response.status_code == 503
        assert response.json()["error"]["message"].startswith("the server is shutting down")
        assert http.get("/health").json() == {"status": "ok", "ready": False}
    assert not running.server.should_exit  # still draining
    gate.set()
    content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert content == "Hello"
    wait_for(lambda: running.server.should_exit)
    with pytest.raises((ServiceUnavailableError, APIConnectionError)):
        client.chat({**CHAT, "stream": False})
    client.close()
