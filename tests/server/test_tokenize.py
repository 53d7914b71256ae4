"""``POST /v1/core/tokenize``: a text's tokens and a chat request's prompt count, as the model
reads them, over a real loopback server; the HTTP backend (and so the adapters) counting
exactly through it; a 501 where the backend holds no tokenizer."""

from __future__ import annotations

import httpx
import pytest

from backend.protocol.catalogue import find_model
from backend.protocol.errors import BadRequestError, NotFoundError
from backend.testing import StubBackend, scripted_backend
from backend.testing.servers import running_server
from tests.chat.test_constrained_calls import WEATHER

CHAT = "core-1-mini-chat"
MESSAGES = [{"role": "user", "content": "What is the weather in Oslo?"}]


@pytest.fixture(scope="module")
def local():
    return scripted_backend("Hello there.")


@pytest.fixture(scope="module")
def server(local):
    with running_server(local) as running:
        yield running


def _post(server, body: dict) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.api_key}"}
    return httpx.post(f"{server.url}/v1/core/tokenize", json=body, headers=headers, timeout=30)


def test_a_text_is_counted_with_its_tokens(server):
    reply = _post(server, {"model": CHAT, "input": "héllo"})
    assert reply.status_code == 200
    assert reply.json() == {
        "model": find_model(CHAT).version,
        "count": 5,
        "max_model_len": find_model(CHAT).context_length,
        "tokens": [ord(c) for c in "héllo"],  # the scripted tokenizer: a token per character
    }


def test_a_chat_request_counts_as_its_usage(server, local):
    for extra in ({}, {"tools": [WEATHER]}, {"tools": [WEATHER], "tool_choice": "none"}):
        request = {"model": CHAT, "messages": MESSAGES, **extra}
        counted = _post(server, request).json()
        assert "tokens" not in counted
        assert counted["count"] == local.chat(request).usage.prompt_tokens
    with_tools = _post(server, {"model": CHAT, "messages": MESSAGES, "tools": [WEATHER]})
    alone = _post(server, {"model": CHAT, "messages": MESSAGES})
    assert with_tools.json()["count"] > alone.json()["count"]  # the tool definitions count


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"model": CHAT}, 400),  # nothing to count
        ({"model": CHAT, "input": "a", "messages": MESSAGES}, 400),  # two things
        ({"model": CHAT, "input": "a", "tools": [WEATHER]}, 400),  # tools go with messages
        ({"model": CHAT, "messages": []}, 400),
        ({"model": "core-embedding-1-large-query", "input": "a"}, 400),  # not a chat model
        ({"model": "no-such-model", "input": "a"}, 404),
    ],
)
def test_bad_bodies_are_refused(server, body, status):
    reply = _post(server, body)
    assert reply.status_code == status, reply.text
    assert reply.json()["error"]["message"]


def test_the_http_backend_counts_through_the_server(server, local):
    client = server.client()
    try:
        assert client.tokenize("abc") == local.tokenize("abc") == [97, 98, 99]
        request = {"model": CHAT, "messages": MESSAGES, "tools": [WEATHER]}
        assert client.count_prompt_tokens(request) == local.count_prompt_tokens(request)
        with pytest.raises(NotFoundError):
            client.count_tokens({"model": "no-such-model", "input": "a"})
        with pytest.raises(BadRequestError):
            client.count_tokens({"model": CHAT})
    finally:
        client.close()


def test_a_server_without_the_tokenizer_answers_501_and_clients_fall_back():
    # Like an engine backend (EngineBackend): no tokenize, no count_prompt_tokens.
    with running_server(StubBackend()) as running:
        reply = _post(running, {"model": CHAT, "input": "a"})
        assert reply.status_code == 501 and "tokenizer" in reply.json()["error"]["message"]
        client = running.client()
        try:
            with pytest.raises(NotImplementedError):
                client.tokenize("a")  # LangChain's get_num_tokens then estimates
        finally:
            client.close()
