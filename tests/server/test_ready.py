"""Readiness (``/ready``: 200 only when models are loaded and the server is not draining, else
503 with ``Retry-After``) beside liveness (``/health``), and the ``x-served-by`` header that
names the replica on every response."""

from __future__ import annotations

import os
import socket

import httpx
import pytest

from backend.server.settings import ServerSettings
from backend.testing import GatedWarmupBackend
from tests.server.helpers import API_KEY
from tests.waiting import wait_for

AUTH = {"Authorization": f"Bearer {API_KEY}"}
CHAT = {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}]}
EMBED = {"model": "core-embedding-1-large-query", "input": "hello"}


def _unavailable(response: httpx.Response, retry_after: str, message: str) -> None:
    assert response.status_code == 503
    assert response.headers["retry-after"] == retry_after
    assert response.json() == {
        "error": {
            "message": message,
            "type": "service_unavailable_error",
            "param": None,
            "code": None,
        }
    }


def test_ready_is_503_while_loading_then_200(serve):
    backend = GatedWarmupBackend()
    running = serve(backend, wait_loaded=False, retry_after=2)
    with httpx.Client(base_url=running.url) as http:
        loading = "the models are still loading; retry shortly"
        _unavailable(http.get("/ready"), "2", loading)
        assert http.get("/health").json() == {"status": "ok", "ready": False}  # alive
        backend.release.set()
        wait_for(lambda: http.get("/ready").status_code == 200)
        response = http.get("/ready")  # no key: probes carry none, like /health's
        assert response.json() == {"status": "ready"}
        assert http.get("/health").json() == {"status": "ok", "ready": True}


def test_ready_is_503_while_draining(serve):
    running = serve()
    with httpx.Client(base_url=running.url) as http:
        assert http.get("/ready").status_code == 200
        running.context.lifecycle.begin_drain()
        draining = "the server is shutting down; retry on another instance or later"
        _unavailable(http.get("/ready"), "1", draining)
        assert http.get("/health").json() == {"status": "ok", "ready": False}


def test_ready_is_503_when_loading_failed(serve):
    backend = GatedWarmupBackend(fail=True)
    backend.release.set()
    running = serve(backend, wait_loaded=False)
    assert running.context.lifecycle.wait_settled(5)
    _unavailable(
        httpx.get(f"{running.url}/ready"), "1", "the models failed to load; see the server log"
    )


def test_every_response_names_the_replica_that_served_it(serve):
    running = serve()
    expected = f"{socket.gethostname()}:{os.getpid()}"
    with httpx.Client(base_url=running.url, headers=AUTH) as http:
        responses = {
            "health": http.get("/health"),
            "ready": http.get("/ready"),
            "metrics": http.get("/metrics"),
            "models": http.get("/v1/core/models"),
            "chat": http.post("/v1/core/chat/completions", json=CHAT),
            "embeddings": http.post("/v1/core/embeddings", json=EMBED),
            "400": http.post("/v1/core/embeddings", json={"model": "nope", "input": "x"}),
            "401": http.get("/v1/core/models", headers={"Authorization": "Bearer wrong"}),
            "404": http.get("/nowhere"),
        }
        with http.stream(
            "POST", "/v1/core/chat/completions", json={**CHAT, "stream": True}
        ) as stream:
            responses["stream"] = stream
            assert list(stream.iter_lines())[-2:] == ["data: [DONE]", ""]
    assert {name: r.headers.get("x-served-by") for name, r in responses.items()} == dict.fromkeys(
        responses, expected
    )
    assert responses["401"].status_code == 401 and responses["404"].status_code == 404


def test_served_by_is_a_setting(serve, monkeypatch):
    monkeypatch.setenv("CORE_SERVER_SERVED_BY", "replica-7")
    running = serve(served_by=ServerSettings.from_env().served_by)
    response = httpx.get(f"{running.url}/v1/core/models")  # no key: a 401 says it too
    assert response.status_code == 401
    assert response.headers["x-served-by"] == "replica-7"


def test_served_by_must_be_a_header_value():
    with pytest.raises(ValueError, match="printable ASCII"):
        ServerSettings(served_by="a\r\nset-cookie: x")
