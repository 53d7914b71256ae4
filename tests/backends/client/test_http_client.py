"""The HTTP client on its own: retries and backoff, error mapping, request bodies, base URLs,
and the SSE decoder. Most run against ``httpx.MockTransport``; one against a real server."""

from __future__ import annotations

import json
import threading
import time
import types

import httpx
import pytest

from backend.backends.client import transport
from backend.backends.client.http import HTTPBackend, normalise_base_url
from backend.backends.client.retries import retry_delay
from backend.protocol.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    RequestTooLargeError,
    ServiceUnavailableError,
)
from backend.protocol.schemas import ChatCompletionRequest
from backend.protocol.sse import encode_event, iter_events
from backend.testing import offline_backend

CHAT = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}]}
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "core-1-mini-chat-240502",
    "system_fingerprint": None,
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}
BASE = "http://127.0.0.1:9"  # never reached: MockTransport answers


def _error_body(message: str, error_type: str = "server_error") -> dict:
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


class Script:
    """Answers each request with the next scripted response (the last one repeats)."""

    def __init__(self, *responses) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.responses[min(len(self.requests), len(self.responses)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def sync(self, **options) -> HTTPBackend:
        client = httpx.Client(transport=httpx.MockTransport(self))
        return HTTPBackend(BASE, api_key="k", http_client=client, **options)

    def asynchronous(self, **options) -> HTTPBackend:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self))
        return HTTPBackend(BASE, api_key="k", async_http_client=client, **options)


def unavailable(retry_after: str | None = "0") -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(
        503, json=_error_body("loading", "service_unavailable_error"), headers=headers
    )


@pytest.mark.parametrize("max_retries", [0, 1, 2])
def test_attempts_are_one_plus_max_retries(max_retries):
    script = Script(unavailable())
    with pytest.raises(ServiceUnavailableError, match="loading"):
        script.sync(max_retries=max_retries).chat(CHAT)
    assert len(script.requests) == 1 + max_retries


@pytest.mark.parametrize("max_retries", [0, 1, 2])
async def test_async_attempts_are_one_plus_max_retries(max_retries):
    script = Script(unavailable())
    with pytest.raises(ServiceUnavailableError):
        await script.asynchronous(max_retries=max_retries).achat(CHAT)
    assert len(script.requests) == 1 + max_retries


def test_recovers_after_two_failures():
    script = Script(
        unavailable(), httpx.Response(502, text="bad gateway"), httpx.Response(200, json=COMPLETION)
    )
    assert script.sync(max_retries=2).chat(CHAT).choices[0].message.content == "Hi"
    assert len(script.requests) == 3


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504])
def test_retried_statuses(status):
    script = Script(
        httpx.Response(status, json=_error_body("x"), headers={"Retry-After": "0"}),
        httpx.Response(200, json=COMPLETION),
    )
    script.sync(max_retries=1).chat(CHAT)
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (404, NotFoundError),
        (413, RequestTooLargeError),
        (422, BadRequestError),
    ],
)
def test_client_errors_are_not_retried(status, error):
    script = Script(httpx.Response(status, json=_error_body("nope", "invalid_request_error")))
    with pytest.raises(error) as caught:
        script.sync(max_retries=2).chat(CHAT)
    assert caught.value.status_code == status and caught.value.message == "nope"
    assert len(script.requests) == 1


def test_connection_errors_and_timeouts_are_retried_then_typed():
    script = Script(httpx.ConnectError("refused"))
    with pytest.raises(APIConnectionError) as caught:
        script.sync(max_retries=2).chat(CHAT)
    assert not isinstance(caught.value, APITimeoutError)
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(script.requests) == 3
    script = Script(httpx.ReadTimeout("slow"), httpx.Response(200, json=COMPLETION))
    assert script.sync(max_retries=1).chat(CHAT).id == "chatcmpl-1"
    script = Script(httpx.ReadTimeout("slow"))
    with pytest.raises(APITimeoutError):
        script.sync(max_retries=0).chat(CHAT)


def test_retry_after_seconds_is_honoured():
    script = Script(
        httpx.Response(
            429, json=_error_body("busy", "rate_limit_error"), headers={"Retry-After": "1"}
        ),
        httpx.Response(200, json=COMPLETION),
    )
    started = time.monotonic()
    script.sync(max_retries=1).chat(CHAT)
    assert time.monotonic() - started >= 1.0  # the backoff alone would wait at most 0.5 s


def test_retry_after_ms_is_honoured(monkeypatch):
    script = Script(
        httpx.Response(503, headers={"retry-after-ms": "20"}), httpx.Response(200, json=COMPLETION)
    )
    waits: list[float] = []
    # The waits asked for, read where the client sleeps (the elapsed time would depend on
    # the machine's load): the backoff alone would wait at least 0.375 s.
    monkeypatch.setattr(transport, "time", types.SimpleNamespace(sleep=waits.append))
    script.sync(max_retries=1).chat(CHAT)
    assert waits == [0.02]


def test_backoff_grows_exponentially_with_jitter_and_is_capped():
    for attempt, base in enumerate([0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]):
        delays = [retry_delay(attempt, None) for _ in range(50)]
        assert all(0.75 * base <= d <= base for d in delays)
    assert retry_delay(0, 3.0) == 3.0
    assert retry_delay(0, 600.0) <= 0.5  # an absurd Retry-After falls back to the backoff


def test_rate_limit_error_carries_retry_after():
    script = Script(
        httpx.Response(
            429, json=_error_body("busy", "rate_limit_error"), headers={"Retry-After": "7"}
        )
    )
    with pytest.raises(RateLimitError) as caught:
        script.sync(max_retries=0).chat(CHAT)
    assert caught.value.retry_after == 7.0


def _sse(*events: str) -> bytes:
    return b"".join(encode_event(e) for e in events)


def test_stream_opens_eagerly_retries_before_it_starts_and_never_after():
    chunk = (
        '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
        '"choices":[{"index":0,"delta":{"content":"a"}}]}'
    )
    script = Script(
        unavailable(),
        httpx.Response(
            200, content=_sse(chunk, "[DONE]"), headers={"content-type": "text/event-stream"}
        ),
    )
    stream = script.sync(max_retries=1).stream_chat(CHAT)
    assert len(script.requests) == 2  # opened (and retried) before iteration
    assert [c.choices[0].delta.content for c in stream] == ["a"]
    assert script.requests[-1].read().count(b'"stream":true') == 1

    broken = Script(httpx.Response(200, content=_sse(chunk)))  # no [DONE]: cut off
    stream = broken.sync(max_retries=2).stream_chat(CHAT)
    assert next(stream).choices[0].delta.content == "a"
    with pytest.raises(APIConnectionError, match="before it was complete"):
        next(stream)
    assert len(broken.requests) == 1


def test_stream_validation_errors_raise_when_called():
    error = _error_body("invalid request: bad", "invalid_request_error")
    script = Script(httpx.Response(400, json=error))
    with pytest.raises(BadRequestError, match="invalid request: bad"):
        script.sync().stream_chat(CHAT)


def test_error_event_maps_to_its_type():
    error = '{"error": {"message": "later", "type": "service_unavailable_error"}}'
    script = Script(httpx.Response(200, content=_sse(error)))
    stream = script.sync().stream_chat(CHAT)
    with pytest.raises(ServiceUnavailableError, match="later"):
        next(stream)


def test_bodies_are_sent_as_given_and_models_without_nulls():
    script = Script(httpx.Response(200, json=COMPLETION))
    service = script.sync()
    service.chat({**CHAT, "temperature": 9, "extra": 1})  # no local validation
    service.chat(ChatCompletionRequest.model_validate(CHAT))
    first, second = (json.loads(request.content) for request in script.requests)
    assert first == {**CHAT, "temperature": 9, "extra": 1, "stream": False}
    assert second == {**CHAT, "stream": False}
    assert script.requests[0].headers["authorization"] == "Bearer k"
    assert str(script.requests[0].url) == f"{BASE}/v1/core/chat/completions"


def test_malformed_success_body_is_a_typed_error():
    script = Script(httpx.Response(200, json={"unexpected": True}))
    with pytest.raises(InternalServerError, match="not a ChatCompletion"):
        script.sync().chat(CHAT)


@pytest.mark.parametrize(
    "given",
    [
        "http://h:1",
        "http://h:1/",
        "http://h:1/v1",
        "http://h:1/v1/",
        "http://h:1/v1/core",
        "http://h:1/v1/core/",
    ],
)
def test_base_url_forms(given):
    assert normalise_base_url(given) == "http://h:1/v1/core"


def test_base_url_needs_a_scheme_and_retries_are_not_negative():
    with pytest.raises(ValueError):
        HTTPBackend("localhost:8000")
    with pytest.raises(ValueError):
        HTTPBackend("http://h:1", max_retries=-1)
    assert "k-secret" not in repr(HTTPBackend("http://h:1", api_key="k-secret"))


def test_clients_are_created_lazily_and_closed():
    service = HTTPBackend("http://127.0.0.1:9")
    assert service._transport._client is None
    client = service._transport._sync_client()
    service.close()
    assert client.is_closed and service._transport._client is None


def test_unreachable_server_is_a_connection_error():
    service = HTTPBackend("http://127.0.0.1:9", max_retries=0, connect_timeout=1)  # discard port
    with pytest.raises(APIConnectionError):
        service.models()


def test_retries_ride_out_a_server_that_is_still_loading(serve):
    class SlowToLoad:
        def __init__(self) -> None:
            self.inner, self.release = offline_backend(), threading.Event()

        def warmup(self) -> None:
            self.release.wait(30)
            self.inner.warmup()

        def __getattr__(self, name):
            return getattr(self.inner, name)

    backend = SlowToLoad()
    running = serve(backend, wait_loaded=False, retry_after=1)
    threading.Timer(0.3, backend.release.set).start()
    started = time.monotonic()
    with running.client(max_retries=2) as client:
        assert client.chat(CHAT).choices[0].message.content == "Hello there."
    assert time.monotonic() - started >= 1.0  # waited the server's Retry-After
    refused = running.context.metrics.requests.labels(
        method="POST", path="/v1/core/chat/completions", status="503"
    )
    assert refused._value.get() == 1


# ---------------------------------------------------------------- the SSE decoder


def test_sse_decoder_follows_the_event_stream_rules():
    raw = (
        b': keep-alive\n\ndata: {"a":1}\r\n\r\nevent: x\nid: 7\ndata: line1\rdata: line2\r\r'
        b"retry: 10\ndata:no-space\n\ndata: [DONE]\n\ndata: cut off"
    )
    expected = [
        ('{"a":1}', None, None),
        ("line1\nline2", "x", "7"),
        ("no-space", None, "7"),
        ("[DONE]", None, "7"),
    ]
    for size in (1, 2, 3, 7, len(raw)):  # every way of splitting lines across chunks
        chunks = [raw[i : i + size] for i in range(0, len(raw), size)]
        assert [(e.data, e.event, e.id) for e in iter_events(chunks)] == expected


def test_sse_decoder_keeps_multibyte_characters_split_across_chunks():
    raw = encode_event('{"content": "안녕 こんにちは"}')
    chunks = [raw[i : i + 1] for i in range(len(raw))]
    assert [e.data for e in iter_events(chunks)] == ['{"content": "안녕 こんにちは"}']
