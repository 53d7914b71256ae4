"""The catalogue of bad input (issue 8): each gets a 400 with a message that says what is wrong.

Run over HTTP against the echo fakes. Cited rather than repeated here: bodies over the size
limit (413) in ``tests/server/test_server_errors.py::test_body_over_the_declared_limit_is_413``
and ``...::test_body_growing_past_the_limit_without_length_is_413``; the same rules on the real
small model in ``tests/test_validation.py``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.reliability.wire import AUTH, CHAT_PATH, EMBED_PATH, chat_body, error_of

QUERY = "core-embedding-1-large-query"
GROUNDEDNESS = "core-1-mini-groundedness-check"
CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
TOOL_REPLY = {"role": "tool", "tool_call_id": "call_1", "content": "42"}


def _raw(text: str) -> bytes:
    return text.encode()


def _chat_messages(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"model": "core-1-mini-chat", "messages": messages, **fields}


#: Tokens counted on top of each string: the query prefix (one a character here) and the
#: encoder's two special tokens.
PREFIX = len("query: ") + 2


def _embed(value: Any) -> dict[str, Any]:
    return {"model": QUERY, "input": value}


def _called(*after: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [CALL]}, *after]


# (case, path, body as bytes or as JSON, message prefix after "invalid request: ")
CATALOGUE: list[tuple[str, str, bytes | dict[str, Any], str]] = [
    ("empty body", CHAT_PATH, b"", "the body is empty"),
    ("malformed JSON", CHAT_PATH, b'{"model": "core-1-mini-chat",', "the body is not valid JSON"),
    ("JSON array body", EMBED_PATH, b"[1, 2]", "the body must be a JSON object, got list"),
    (
        "wrong type: messages",
        CHAT_PATH,
        {"model": "core-1-mini-chat", "messages": "hi"},
        "messages: Input should be a valid list",
    ),
    ("wrong type: model", EMBED_PATH, {"model": 7, "input": "x"}, "model: Input should be"),
    ("wrong type: temperature", CHAT_PATH, chat_body("hi", temperature="hot"), "temperature:"),
    (
        "deeply nested JSON",
        CHAT_PATH,
        _raw("[" * 100_000 + "]" * 100_000),
        "the body nests arrays and objects more than 64 levels deep",
    ),
    (
        "nested inside a tool schema",
        CHAT_PATH,
        _raw(
            '{"model": "core-1-mini-chat", "messages": [], "tools": ['
            + "{"
            + '"a": {' * 80
            + "}" * 80
            + "}]}"
        ),
        "the body nests arrays and objects more than 64 levels deep",
    ),
    (
        "invalid UTF-8",
        CHAT_PATH,
        b'{"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
        "the body is not valid JSON ('utf-8' codec can't decode",
    ),
    (
        "lone surrogate escape",
        CHAT_PATH,
        _raw(json.dumps(chat_body("\ud800"))),
        "the body holds a string with an unpaired UTF-16 surrogate",
    ),
    (
        "NaN",
        CHAT_PATH,
        _raw(json.dumps(chat_body("hi", temperature=float("nan")))),
        "the body is not valid JSON (NaN is not a JSON number)",
    ),
    (
        "Infinity",
        CHAT_PATH,
        _raw(json.dumps(chat_body("hi", max_tokens=float("inf")))),
        "the body is not valid JSON (Infinity is not a JSON number)",
    ),
    (
        "-Infinity in a tool schema",
        CHAT_PATH,
        _raw(
            '{"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}], "tools": '
            '[{"type": "function", "function": {"name": "f", "parameters": {"minimum": -Infinity}}}]}'
        ),
        "the body is not valid JSON (-Infinity is not a JSON number)",
    ),
    (
        "thousands of messages",
        CHAT_PATH,
        _chat_messages([{"role": "user", "content": "hi"}] * 3000),
        "messages holds 3000 messages; this server accepts at most 2048 per request",
    ),
    (
        "messages past the context",
        CHAT_PATH,
        _chat_messages([{"role": "user", "content": "hi"}] * 2000),
        "the messages take",
    ),
    ("a megabyte string in chat", CHAT_PATH, chat_body("x" * 1_000_000), "the messages take 1000"),
    ("a megabyte string to embed", EMBED_PATH, _embed("x" * 1_000_000), "input has 1000"),
    ("empty messages", CHAT_PATH, _chat_messages([]), "messages must hold at least one message"),
    ("empty input array", EMBED_PATH, _embed([]), "input must hold at least one string"),
    (
        "unknown role",
        CHAT_PATH,
        _chat_messages([{"role": "wizard", "content": "hi"}]),
        "messages[0].role: Input should be 'system', 'user', 'assistant' or 'tool'",
    ),
    (
        "duplicate tool-call ids",
        CHAT_PATH,
        _chat_messages(_called(TOOL_REPLY, {"role": "assistant", "tool_calls": [CALL]})),
        "messages[3]: duplicate tool call id 'call_1'",
    ),
    (
        "tool message answering no call",
        CHAT_PATH,
        _chat_messages([{"role": "user", "content": "hi"}, TOOL_REPLY]),
        "messages[1]: tool message answers tool_call_id 'call_1', which no earlier assistant",
    ),
    (
        "tool message answering a call twice",
        CHAT_PATH,
        _chat_messages(_called(TOOL_REPLY, TOOL_REPLY)),
        "messages[3]: tool message answers tool_call_id 'call_1'",
    ),
    (
        "temperature below 0",
        CHAT_PATH,
        chat_body("hi", temperature=-0.1),
        "temperature: temperature must be between 0 and 2, got -0.1",
    ),
    (
        "temperature above 2",
        CHAT_PATH,
        chat_body("hi", temperature=2.01),
        "temperature: temperature must be between 0 and 2, got 2.01",
    ),
    (
        "groundedness temperature above 2",
        CHAT_PATH,
        {
            "model": GROUNDEDNESS,
            "temperature": 3,
            "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "a"}],
        },
        "temperature: temperature must be between 0 and 2, got 3",
    ),
    (
        "max_tokens zero",
        CHAT_PATH,
        chat_body("hi", max_tokens=0),
        "max_tokens: max_tokens must be at least 1, got 0",
    ),
    (
        "max_tokens negative",
        CHAT_PATH,
        chat_body("hi", max_tokens=-5),
        "max_tokens: max_tokens must be at least 1, got -5",
    ),
    (
        "max_tokens beyond the context",
        CHAT_PATH,
        chat_body("hi", max_tokens=5000),
        "57 input tokens plus max_tokens 5000 exceed the model's context length of 4096 tokens",
    ),
    (
        "max_tokens astronomically large",
        CHAT_PATH,
        chat_body("hi", max_tokens=10**30),
        "57 input tokens plus max_tokens 1000000000000000000000000000000 exceed",
    ),
    (
        "101 embedding strings",
        EMBED_PATH,
        _embed(["a"] * 101),
        "input holds 101 strings; at most 100 are allowed per request",
    ),
    ("empty embedding string", EMBED_PATH, _embed(""), "input is empty"),
    ("empty string in the array", EMBED_PATH, _embed(["a", ""]), "input[1] is empty"),
    (
        "a string over 4000 tokens",
        EMBED_PATH,
        _embed(["a", "b" * (4001 - PREFIX)]),
        "input[1] has 4001 tokens; at most 4000 tokens are allowed per string",
    ),
    (
        "over 204,800 tokens in total",
        EMBED_PATH,
        _embed(["c" * (4000 - PREFIX)] * 52),
        "the inputs have 208000 tokens in total; a request must stay under 204800 tokens",
    ),
    (
        "exactly 204,800 tokens in total",
        EMBED_PATH,
        _embed(["c" * (4000 - PREFIX)] * 51 + ["c" * (800 - PREFIX)]),
        "the inputs have 204800 tokens in total",
    ),
]


@pytest.fixture(scope="module")
def http(echo_server):
    with httpx.Client(base_url=echo_server.url, headers=AUTH, timeout=60) as client:
        yield client


@pytest.mark.parametrize(
    ("path", "body", "message"), [c[1:] for c in CATALOGUE], ids=[c[0] for c in CATALOGUE]
)
def test_bad_input_is_a_400_that_says_what_is_wrong(http, path, body, message):
    if isinstance(body, bytes):
        response = http.post(path, content=body, headers={"Content-Type": "application/json"})
    else:
        response = http.post(path, json=body)
    assert response.status_code == 400, response.text[:300]
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("invalid request: " + message), error["message"]


@pytest.mark.parametrize("kind", ["chat", "embeddings"])
def test_the_server_still_answers_after_the_catalogue(http, kind):
    if kind == "chat":
        reply = http.post(CHAT_PATH, json=chat_body("still here")).json()
        assert reply["choices"][0]["message"]["content"] == "echo: still here"
    else:
        assert len(http.post(EMBED_PATH, json=_embed("ok")).json()["data"]) == 1
