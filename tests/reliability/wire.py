"""Reading the server's answers in the reliability tests: error objects and SSE streams."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.server.helpers import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}"}
CHAT_PATH = "/v1/core/chat/completions"
EMBED_PATH = "/v1/core/embeddings"


def chat_body(content: str, **fields: Any) -> dict[str, Any]:
    return {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": content}],
        **fields,
    }


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The spec's error object (2.8) of a 4xx/5xx response; fails on any other shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]


def sse_payloads(lines: list[str]) -> list[Any]:
    """The ``data:`` payloads of an event stream, ``[DONE]`` kept as the string."""
    payloads: list[Any] = []
    for line in lines:
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            payloads.append(data if data == "[DONE]" else json.loads(data))
    return payloads


def streamed_text(payloads: list[Any]) -> str:
    """The content a stream delivered; fails if it did not end with ``[DONE]``."""
    assert payloads and payloads[-1] == "[DONE]", payloads[-3:]
    return "".join(
        choice["delta"].get("content") or ""
        for chunk in payloads[:-1]
        for choice in chunk["choices"]
    )
