"""Every failure is the spec's error object with the right status and headers: 400, 404, 405,
413, 429, 500, 503, 504; plus request ids, the OpenAPI document and the metrics."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from backend.protocol.errors import ServiceUnavailableError
from backend.testing import GatedWarmupBackend, offline_backend
from tests.server.helpers import API_KEY, SlowChatEngine
from tests.waiting import wait_for

AUTH = {"Authorization": f"Bearer {API_KEY}"}
CHAT = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}]}
EMBED = {"model": "core-embedding-1-large-query", "input": "hello"}


def _error(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.fixture(scope="module")
def http(fake_server):
    with httpx.Client(base_url=fake_server.url, headers=AUTH, timeout=30) as client:
        yield client


def test_unknown_model_is_404(http):
    response = http.post("/v1/core/chat/completions", json={**CHAT, "model": "gpt-4"})
    assert response.status_code == 404
    error = _error(response)
    assert error["message"].startswith("invalid request: model 'gpt-4' does not exist")
    assert error["type"] == "invalid_request_error"


def test_wrong_method_is_405_with_allow(http):
    response = http.get("/v1/core/chat/completions")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert _error(response)["message"] == "method not allowed: GET /v1/core/chat/completions"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "invalid request: the body is empty; send a JSON object"),
        (b"{not json", "invalid request: the body is not valid JSON"),
        (b"[1, 2]", "invalid request: the body must be a JSON object, got list"),
        (b'{"messages": []}', "invalid request: model: Field required"),
    ],
)
def test_malformed_bodies_are_400_never_422(http, content, message):
    response = http.post("/v1/core/chat/completions", content=content)
    assert response.status_code == 400
    assert _error(response)["message"].startswith(message)


def test_request_id_is_returned_and_a_sane_client_id_is_kept(http):
    first, second = http.get("/health"), http.get("/health")
    assert len(first.headers["x-request-id"]) == 32
    assert first.headers["x-request-id"] != second.headers["x-request-id"]

    def echoed(sent: str) -> str:
        return http.get("/health", headers={"x-request-id": sent}).headers["x-request-id"]

    assert echoed("trace-42") == "trace-42"
    assert echoed("bad id\twith spaces") != "bad id\twith spaces"


def test_body_over_the_declared_limit_is_413(serve):
    running = serve(max_body_bytes=1024)
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 4000}]}
    response = httpx.post(f"{running.url}/v1/core/chat/completions", json=big, headers=AUTH)
    assert response.status_code == 413
    assert _error(response)["message"] == (
        "request body too large: at most 1024 bytes are accepted"
    )


def test_body_growing_past_the_limit_without_length_is_413(serve):
    running = serve(max_body_bytes=1024)

    def chunks():
        yield b'{"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"x" * 500
        yield b'"}]}'

    response = httpx.post(f"{running.url}/v1/core/chat/completions", content=chunks(), headers=AUTH)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert _error(response)["type"] == "invalid_request_error"


def test_unexpected_failure_is_500_without_internals(serve):
    running = serve(offline_backend(SlowChatEngine("Hello", fail_after=2)))
    response = httpx.post(f"{running.url}/v1/core/chat/completions", json=CHAT, headers=AUTH)
    assert response.status_code == 500
    error = _error(response)
    request_id = response.headers["x-request-id"]
    assert error == {
        "message": f"internal server error (request id {request_id})",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    assert "secret" not in response.text and "Traceback" not in response.text


def test_model_requests_get_503_until_the_models_are_loaded(serve):
    backend = GatedWarmupBackend()
    running = serve(backend, wait_loaded=False, retry_after=3)
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        assert http.get("/health").json() == {"status": "ok", "ready": False}
        for path, body in (("/v1/core/chat/completions", CHAT), ("/v1/core/embeddings", EMBED)):
            response = http.post(path, json=body)
            assert response.status_code == 503
            assert response.headers["retry-after"] == "3"
            assert _error(response)["message"] == "the models are still loading; retry shortly"
        assert http.get("/v1/core/models").status_code == 200  # needs no model
        backend.release.set()
        wait_for(lambda: http.get("/health").json()["ready"])
        assert http.post("/v1/core/chat/completions", json=CHAT).status_code == 200


def test_failed_loading_keeps_answering_503(serve):
    backend = GatedWarmupBackend(fail=True)
    backend.release.set()
    running = serve(backend, wait_loaded=False)
    wait_for(lambda: running.context.lifecycle.load_error is not None)
    response = httpx.post(f"{running.url}/v1/core/chat/completions", json=CHAT, headers=AUTH)
    assert response.status_code == 503
    assert _error(response)["message"] == "the models failed to load; see the server log"
    assert httpx.get(f"{running.url}/health").json() == {"status": "ok", "ready": False}


def test_a_full_queue_answers_429_with_retry_after(serve):
    gate = threading.Event()
    engine = SlowChatEngine("Hi", gate=gate)
    running = serve(offline_backend(engine), max_concurrent=1, max_queued=1, retry_after=2)
    limiter = running.context.limiter
    client = running.client(max_retries=0)
    with ThreadPoolExecutor(2) as pool:
        try:
            running_request = pool.submit(client.chat, CHAT)
            wait_for(lambda: limiter.active == 1 and engine.started.is_set())
            queued_request = pool.submit(client.chat, CHAT)
            wait_for(lambda: limiter.queued == 1)
            response = httpx.post(f"{running.url}/v1/core/embeddings", json=EMBED, headers=AUTH)
            assert response.status_code == 429
            assert response.headers["retry-after"] == "2"
            assert _error(response)["type"] == "rate_limit_error"
        finally:
            gate.set()
        assert running_request.result(10).choices[0].message.content == "Hi"
        assert queued_request.result(10).choices[0].message.content == "Hi"
    wait_for(lambda: limiter.active == 0 and limiter.queued == 0)
    client.close()


def test_a_request_past_the_timeout_is_504_and_keeps_its_place_until_the_model_stops(serve):
    gate = threading.Event()
    engine = SlowChatEngine("Hi", gate=gate)
    running = serve(offline_backend(engine), request_timeout=0.3, max_concurrent=1)
    try:
        response = httpx.post(f"{running.url}/v1/core/chat/completions", json=CHAT, headers=AUTH)
        assert response.status_code == 504
        assert _error(response) == {
            "message": "the request ran past the server's request timeout",
            "type": "timeout_error",
            "param": None,
            "code": None,
        }
        assert running.context.limiter.active == 1  # the model thread still runs
    finally:
        gate.set()
    wait_for(lambda: running.context.limiter.active == 0)


def test_openapi_describes_requests_responses_and_errors(http):
    schema = http.get("/openapi.json").json()
    components = schema["components"]["schemas"]

    def resolve(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref:
                assert ref.removeprefix("#/components/schemas/") in components, ref
            for value in node.values():
                resolve(value)
        elif isinstance(node, list):
            for value in node:
                resolve(value)

    resolve(schema)
    chat = schema["paths"]["/v1/core/chat/completions"]["post"]
    body = chat["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert body.endswith("/ChatCompletionRequest")
    assert "temperature" in components["ChatCompletionRequest"]["properties"]
    assert "text/event-stream" in chat["responses"]["200"]["content"]
    for status in ("400", "401", "404", "413", "429", "500", "503"):
        error_schema = chat["responses"][status]["content"]["application/json"]["schema"]
        assert error_schema["$ref"].endswith("/ErrorResponse")
    embeddings = schema["paths"]["/v1/core/embeddings"]["post"]
    assert embeddings["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/EmbeddingRequest"
    )
    assert "422" not in chat["responses"]


def test_metrics_count_requests_latency_and_tokens(serve):
    running = serve()
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        assert http.post("/v1/core/chat/completions", json=CHAT).status_code == 200
        assert http.post("/v1/core/embeddings", json=EMBED).status_code == 200
        assert http.get("/v1/core/nope").status_code == 404
        text = http.get("/metrics").text
    assert (
        'core_http_requests_total{method="POST",path="/v1/core/chat/completions",status="200"} 1.0'
        in text
    )
    assert 'core_http_requests_total{method="GET",path="unmatched",status="404"} 1.0' in text
    assert (
        'core_http_request_duration_seconds_count{method="POST",path="/v1/core/embeddings"} 1.0'
        in text
    )
    assert 'core_tokens_total{kind="completion",model="core-1-mini-chat-240502"} 13.0' in text
    assert 'core_tokens_total{kind="prompt",model="core-embedding-1-large-query"}' in text
    assert "core_model_requests_running 0.0" in text
    assert API_KEY not in text


def test_service_unavailable_carries_retry_after_through_the_client(serve):
    backend = GatedWarmupBackend()
    running = serve(backend, wait_loaded=False)
    with pytest.raises(ServiceUnavailableError) as caught:
        running.client(max_retries=0).embed(EMBED)
    assert caught.value.status_code == 503 and caught.value.retry_after == 1
    backend.release.set()
