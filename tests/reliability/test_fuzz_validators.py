"""Hypothesis properties of the validators: whatever the body, a result or a 4xx error.

Three layers are fuzzed: the server's JSON body reader on arbitrary bytes, and the whole
validation pipeline of the in-process backend (the same ``parse_request`` and ``check_*``
functions the server calls) on arbitrary JSON and on valid requests with parts replaced by
arbitrary JSON or removed. Nothing may escape as another exception or a 5xx error.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.protocol.errors import BadRequestError, CoreError
from backend.server.json_body import parse_json_body
from backend.testing import EchoChatEngine, offline_backend

#: Examples per property; bounded for the suite's CI time budget.
EXAMPLES = 300
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
OUTCOMES: Counter[str] = Counter()

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
#: Values that fit somewhere in a request, so replacements often stay nearly valid.
PLAUSIBLE = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        1,
        2,
        -1,
        0.5,
        2.5,
        4096,
        10**9,
        "",
        "x",
        "auto",
        "none",
        "required",
        "user",
        "assistant",
        "tool",
        "system",
        "function",
        "call_1",
        "get_weather",
        "float",
        "base64",
        [],
        {},
        ["a"],
        [""],
        {"name": "get_weather"},
        {"include_usage": False},
    ]
)
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CHAT = {
    "model": "core-1-mini-chat",
    "temperature": 0.5,
    "max_tokens": 16,
    "stop": ["\n\n"],
    "tools": [TOOL],
    "tool_choice": "auto",
    "stream_options": {"include_usage": True},
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny."},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    ],
}
GROUNDEDNESS = {
    "model": "core-1-mini-groundedness-check",
    "messages": [
        {"role": "user", "content": "The tower is 330 m tall."},
        {"role": "assistant", "content": "The tower is 330 m tall."},
    ],
}
EMBED = {
    "model": "core-embedding-1-large-passage",
    "input": ["first text", "second text"],
    "encoding_format": "float",
    "dimensions": 26,
}


@pytest.fixture(scope="module")
def backend():
    service = offline_backend(EchoChatEngine())
    yield service
    service.close()


@pytest.fixture(scope="module", autouse=True)
def _report(figures):
    yield
    figures["hypothesis cases run"] = sum(OUTCOMES.values())
    figures["hypothesis outcomes"] = dict(sorted(OUTCOMES.items()))


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key and index path in a JSON value, the value itself included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> Any:
    """``valid`` with up to three parts replaced (plausible values or any JSON) or removed."""
    body: Any = copy.deepcopy(valid)
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(body)))
        if not path:
            return draw(JSON)
        parent = body
        for part in path[:-1]:
            parent = parent[part]
        if draw(st.booleans()):
            # A copy: PLAUSIBLE's lists and dicts are shared between examples, and a later
            # mutation (or the code under test) must not change them, or hypothesis replays
            # differently and reports a flaky strategy.
            parent[path[-1]] = copy.deepcopy(draw(PLAUSIBLE | JSON))
        elif isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    return body


def _result_or_4xx(call: Callable[[], Any], kind: str) -> None:
    try:
        call()
    except CoreError as error:
        assert error.status_code is not None and 400 <= error.status_code < 500, repr(error)
        assert error.message
        OUTCOMES[f"{kind} {error.status_code}"] += 1
    else:
        OUTCOMES[f"{kind} ok"] += 1


def _chat_every_way(backend, body: Any) -> None:
    if isinstance(body, dict) and body.get("stream") is True:
        _result_or_4xx(lambda: list(backend.stream_chat(body)), "stream")
    else:
        _result_or_4xx(lambda: backend.chat(body), "chat")


@FUZZ
@given(st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_the_body_reader_returns_json_or_a_400(raw):
    try:
        value = parse_json_body(raw)
    except BadRequestError as error:
        assert error.status_code == 400 and error.message.startswith("invalid request: ")
        OUTCOMES["body reader 400"] += 1
    else:
        assert json.loads(raw) == value
        OUTCOMES["body reader ok"] += 1


@FUZZ
@given(JSON | mutated(CHAT) | mutated(GROUNDEDNESS))
def test_chat_validation_answers_a_result_or_a_4xx(backend, body):
    _chat_every_way(backend, body)


@FUZZ
@given(mutated({**CHAT, "stream": True}))
def test_stream_validation_answers_a_result_or_a_4xx(backend, body):
    _chat_every_way(backend, body)


@FUZZ
@given(JSON | mutated(EMBED))
def test_embedding_validation_answers_a_result_or_a_4xx(backend, body):
    _result_or_4xx(lambda: backend.embed(body), "embed")
