"""The official ``openai`` SDK against the server: chat, streaming with usage, tool calls,
embeddings (its default encoding is base64) and errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

openai = pytest.importorskip("openai")

from backend.testing import ScriptedChatEngine, offline_backend  # noqa: E402
from backend.testing.servers import running_server  # noqa: E402
from tests.server.helpers import API_KEY  # noqa: E402
from tests.tools import WEATHER as WEATHER_TOOL  # noqa: E402

TOOL_REPLY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Seoul"}}\n</tool_call>'
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def engine():
    return ScriptedChatEngine("Hello there.")


@pytest.fixture(scope="module")
def server(engine):
    with running_server(offline_backend(engine)) as running:
        yield running


@pytest.fixture
def sdk(server, engine):
    engine.reply = "Hello there."
    with openai.OpenAI(base_url=f"{server.url}/v1/core", api_key=API_KEY, max_retries=0) as client:
        yield client


def test_chat(sdk):
    completion = sdk.chat.completions.create(model="core-1-mini-chat", messages=MESSAGES)
    assert completion.object == "chat.completion"
    assert completion.model == "core-1-mini-chat-240502"
    assert completion.choices[0].message.content == "Hello there."
    assert completion.choices[0].finish_reason == "stop"
    usage = completion.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_streaming_with_usage(sdk):
    chunks = list(
        sdk.chat.completions.create(
            model="core-1-mini-chat",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert len({(c.id, c.created) for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there."
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 13


def test_tool_calls_and_the_answer_round_trip(sdk, engine):
    engine.reply = TOOL_REPLY
    completion = sdk.chat.completions.create(
        model="core-1-mini-chat", messages=MESSAGES, tools=[WEATHER_TOOL], tool_choice="auto"
    )
    message = completion.choices[0].message
    (call,) = message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Seoul"}
    engine.reply = "It is sunny in Seoul."
    answer = sdk.chat.completions.create(
        model="core-1-mini-chat",
        messages=[
            *MESSAGES,
            message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "sunny"}'},
        ],
        tools=[WEATHER_TOOL],
    )
    assert answer.choices[0].message.content == "It is sunny in Seoul."


def test_streamed_tool_calls(sdk, engine):
    engine.reply = TOOL_REPLY
    calls: dict[int, dict[str, str]] = {}
    for chunk in sdk.chat.completions.create(
        model="core-1-mini-chat", messages=MESSAGES, tools=[WEATHER_TOOL], stream=True
    ):
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            call["name"] += delta.function.name or ""
            call["arguments"] += delta.function.arguments or ""
    assert list(calls) == [0]
    assert calls[0]["id"] and calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == {"city": "Seoul"}


TWO_CALLS_REPLY = (
    '<tool_call>\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
    '{"name": "get_weather", "arguments": {"city": "Tokyo"}}]\n</tool_call>'
)


@pytest.mark.parametrize("parallel", [None, False])
def test_streamed_parallel_tool_calls_match_the_message(sdk, engine, parallel):
    engine.reply = TWO_CALLS_REPLY
    extra = {} if parallel is None else {"parallel_tool_calls": parallel}
    request = {"model": "core-1-mini-chat", "messages": MESSAGES, "tools": [WEATHER_TOOL], **extra}
    message = sdk.chat.completions.create(**request).choices[0].message
    calls: dict[int, dict[str, str]] = {}
    for chunk in sdk.chat.completions.create(**request, stream=True):
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            call["name"] += delta.function.name or ""
            call["arguments"] += delta.function.arguments or ""
    cities = ["Paris", "Tokyo"] if parallel is None else ["Paris"]
    assert list(calls) == list(range(len(cities)))
    assert len({c["id"] for c in calls.values()}) == len(cities)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [
        (c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls
    ]
    assert [json.loads(c.function.arguments)["city"] for c in message.tool_calls] == cities


def test_embeddings_base64_default_matches_float(sdk):
    texts = ["the sky is blue", "grass is green"]
    default = sdk.embeddings.create(model="core-embedding-1-large-passage", input=texts)
    floats = sdk.embeddings.create(
        model="core-embedding-1-large-passage", input=texts, encoding_format="float"
    )
    assert [d.index for d in default.data] == [0, 1]
    assert default.model == "core-embedding-1-large-passage"
    np.testing.assert_allclose(
        [d.embedding for d in default.data], [d.embedding for d in floats.data], rtol=1e-6
    )
    assert default.usage.prompt_tokens > 0


def test_errors_raise_the_sdk_exceptions(sdk, server):
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert caught.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError, match="temperature must be between 0 and 2"):
        sdk.chat.completions.create(model="core-1-mini-chat", messages=MESSAGES, temperature=2.5)
    with pytest.raises(openai.BadRequestError, match="1 user message expected, found 2"):
        sdk.chat.completions.create(
            model="core-1-mini-groundedness-check",
            messages=[
                {"role": "user", "content": "a"},
                {"role": "user", "content": "b"},
                {"role": "assistant", "content": "c"},
            ],
        )
    with openai.OpenAI(base_url=f"{server.url}/v1/core", api_key="wrong", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()


def test_models_list(sdk):
    ids = [model.id for model in sdk.models.list()]
    assert "core-1-mini-chat" in ids and "core-embedding-1-large-query" in ids


async def test_async_streaming(server, engine):
    engine.reply = "Hello there."
    async with openai.AsyncOpenAI(
        base_url=f"{server.url}/v1/core", api_key=API_KEY, max_retries=0
    ) as client:
        stream = await client.chat.completions.create(
            model="core-1-mini-chat",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there."
    assert chunks[-1].usage is not None
