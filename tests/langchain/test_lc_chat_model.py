"""``ChatCore`` offline: the standard unit suite, and behaviour on the scripted engine
(sync/async x invoke/stream over one set of expectations)."""

from __future__ import annotations

import asyncio
import json
import time
import warnings

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langchain_tests.unit_tests import ChatModelUnitTests
from pydantic import BaseModel, Field

import backend
from backend.backends.local import InProcessBackend
from backend.backends.local.shared import shared_backend
from backend.protocol.errors import BadRequestError
from backend.testing import (
    CharCountEmbeddingEngine,
    RecordingBackend,
    ScriptedChatEngine,
    StubBackend,
    offline_backend,
    scripted_backend,
)
from langchain_core_ext import ChatCore
from langchain_core_ext.chat_models import estimate_token_count, tool_choice_to_wire

VERSIONED = "core-1-mini-chat-240502"
ADD_CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Person(BaseModel):
    """A person."""

    name: str = Field(description="The name.")
    age: int = Field(description="The age in years.")


class TestChatCoreUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[ChatCore]:
        return ChatCore

    @property
    def chat_model_params(self) -> dict:
        return {"model": "core-1-mini-chat"}

    @property
    def init_from_env_params(self) -> tuple[dict, dict, dict]:
        return (
            {"CORE_API_KEY": "env-key", "CORE_BASE_URL": "http://127.0.0.1:9"},
            {},
            {"api_key": "env-key", "base_url": "http://127.0.0.1:9"},
        )

    @property
    def model_override_value(self) -> str:
        return "core-1-mini-chat-ja"


# ---------------------------------------------------------------- one call, four ways


async def _call(llm, how: str, messages):
    """Invoke or stream (sync or async); streamed chunks are added up."""
    if how == "invoke":
        return llm.invoke(messages)
    if how == "ainvoke":
        return await llm.ainvoke(messages)
    full = None
    if how == "stream":
        for chunk in llm.stream(messages):
            assert isinstance(chunk, AIMessageChunk)
            full = chunk if full is None else full + chunk
    else:
        async for chunk in llm.astream(messages):
            assert isinstance(chunk, AIMessageChunk)
            full = chunk if full is None else full + chunk
    return full


WAYS = ["invoke", "ainvoke", "stream", "astream"]


@pytest.mark.parametrize("how", WAYS)
async def test_text_reply_with_usage_and_metadata(how):
    service = scripted_backend("Hello there.")
    llm = ChatCore(backend=service, temperature=0)
    message = await _call(llm, how, "hi")
    assert message.content == "Hello there."
    expected_prompt = llm.get_num_tokens_from_messages([HumanMessage("hi")])
    assert message.usage_metadata == {
        "input_tokens": expected_prompt,
        "output_tokens": len("Hello there.") + 1,  # the end-of-turn token counts
        "total_tokens": expected_prompt + len("Hello there.") + 1,
    }
    assert message.response_metadata["model_name"] == VERSIONED
    assert message.response_metadata["finish_reason"] == "stop"


@pytest.mark.parametrize("how", WAYS)
async def test_logprobs_in_the_response_metadata_as_chat_openai_puts_them(how):
    llm = ChatCore(backend=scripted_backend("Hi!"), logprobs=True, top_logprobs=1)
    message = await _call(llm, how, "hi")
    entries = message.response_metadata["logprobs"]["content"]
    assert [entry["token"] for entry in entries] == ["H", "i", "!"]
    assert entries[0] == {
        "token": "H",
        "logprob": 0.0,
        "bytes": [72],
        "top_logprobs": [{"token": "H", "logprob": 0.0, "bytes": [72]}],
    }
    plain = await _call(ChatCore(backend=scripted_backend("Hi!")), how, "hi")
    assert "logprobs" not in plain.response_metadata


@pytest.mark.parametrize("how", WAYS)
async def test_tool_call_reply(how, scripted):
    llm = ChatCore(backend=scripted(ADD_CALL)).bind_tools([add])
    message = await _call(llm, how, "What is 1 + 2?")
    assert message.content == ""
    assert len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert (call["name"], call["args"], call["type"]) == ("add", {"a": 1, "b": 2}, "tool_call")
    assert call["id"].startswith("call_")


def test_streamed_tool_call_chunks_carry_the_index(scripted):
    llm = ChatCore(backend=scripted(ADD_CALL)).bind_tools([add])
    pieces = [c for chunk in llm.stream("1+2?") for c in chunk.tool_call_chunks]
    assert [p["index"] for p in pieces] == [0, 0]
    assert pieces[0]["name"] == "add" and pieces[0]["id"]
    assert json.loads(pieces[1]["args"]) == {"a": 1, "b": 2}


def test_usage_only_on_the_last_chunk_and_can_be_turned_off(scripted):
    chunks = list(ChatCore(backend=scripted()).stream("hi"))
    with_usage = [c for c in chunks if c.usage_metadata]
    assert len(with_usage) == 1
    assert (
        chunks.index(with_usage[0]) >= len(chunks) - 2
    )  # the usage chunk, then LangChain's end marker
    assert not any(
        c.usage_metadata for c in ChatCore(backend=scripted(), stream_usage=False).stream("hi")
    )
    service = scripted()
    list(ChatCore(backend=service).stream("hi", stream_usage=False))
    assert "stream_options" not in service.requests[-1]
    ChatCore(backend=service).invoke("hi", stream_usage=False)
    assert "stream_usage" not in service.requests[-1]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("any", {"type": "function", "function": {"name": "add"}}),  # the only tool
        ("required", {"type": "function", "function": {"name": "add"}}),
        ("add", {"type": "function", "function": {"name": "add"}}),
        (True, {"type": "function", "function": {"name": "add"}}),
        (None, None),
        (False, None),
        (
            {"type": "function", "function": {"name": "add"}},
            {"type": "function", "function": {"name": "add"}},
        ),
    ],
)
def test_tool_choice_to_wire(choice, expected):
    assert tool_choice_to_wire(choice, ["add"]) == expected


@pytest.mark.parametrize("choice", ["any", "required"])
def test_some_call_among_several_tools_is_required(choice):
    assert tool_choice_to_wire(choice, ["add", "mul"]) == "required"


@pytest.mark.parametrize(
    ("choice", "names", "message"),
    [("mul", ["add"], "not among the bound tools"), (True, ["add", "mul"], "2 tools")],
)
def test_tool_choice_errors(choice, names, message):
    with pytest.raises(ValueError, match=message):
        tool_choice_to_wire(choice, names)


def test_bind_tools_sends_tools_and_forced_choice(scripted):
    service = scripted('{"a": 1, "b": 2}}\n</tool_call>')  # continues the forced call's opening

    def multiply(x: float, y: float) -> float:
        """Multiply two numbers."""
        return x * y

    as_dict = {
        "type": "function",
        "function": {
            "name": "noop",
            "description": "Nothing.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    llm = ChatCore(backend=service).bind_tools([add, Person, multiply, as_dict], tool_choice="add")
    message = llm.invoke("1+2?")
    request = service.requests[-1]
    assert [t["function"]["name"] for t in request["tools"]] == [
        "add",
        "Person",
        "multiply",
        "noop",
    ]
    assert request["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert message.tool_calls[0]["args"] == {"a": 1, "b": 2}


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_structured_output_pydantic_and_json_schema(how, scripted):
    call, answer = '{"name": "Ann", "age": 31}}\n</tool_call>', '{"name": "Ann", "age": 31}'
    for schema, expected in [
        (Person, Person(name="Ann", age=31)),
        (Person.model_json_schema(), {"name": "Ann", "age": 31}),
    ]:
        for method in ("function_calling", "json_schema"):
            if method == "function_calling":
                service = scripted(call)
            else:
                engine = ScriptedChatEngine(answer, constrains=True)
                service = RecordingBackend(offline_backend(engine))
            structured = ChatCore(backend=service).with_structured_output(schema, method=method)
            result = (
                structured.invoke("Ann is 31")
                if how == "invoke"
                else await structured.ainvoke("Ann is 31")
            )
            assert result == expected
            request = service.requests[-1]
            if method == "function_calling":
                assert request["tool_choice"] == {
                    "type": "function",
                    "function": {"name": "Person"},
                }
                continue
            assert "tools" not in request
            response_format = request["response_format"]
            assert response_format["type"] == "json_schema"
            assert response_format["json_schema"]["name"] == "Person"
            assert response_format["json_schema"]["schema"]["required"] == ["name", "age"]
            # ...and the engine was held to it
            constraint = engine.constraints[-1]
            assert constraint.schema["required"] == ["name", "age"]


def test_structured_output_include_raw_and_parsing_error(scripted):
    raw = (
        ChatCore(backend=scripted('{"name": "Ann", "age": 31}}</tool_call>'))
        .with_structured_output(Person, include_raw=True)
        .invoke("Ann is 31")
    )
    assert raw["parsed"] == Person(name="Ann", age=31)
    assert isinstance(raw["raw"], AIMessage) and raw["parsing_error"] is None
    broken = (
        ChatCore(backend=scripted('{"name": "Ann"}}</tool_call>'))
        .with_structured_output(Person, include_raw=True)
        .invoke("Ann")
    )
    assert broken["parsed"] is None and broken["parsing_error"] is not None


def test_structured_output_json_mode_sends_json_object(scripted):
    engine = ScriptedChatEngine('{"name": "Ann", "age": 31}', constrains=True)
    service = RecordingBackend(offline_backend(engine))
    result = (
        ChatCore(backend=service)
        .with_structured_output(Person, method="json_mode")
        .invoke("JSON please")
    )
    assert result == Person(name="Ann", age=31)
    assert "tools" not in service.requests[-1]
    assert service.requests[-1]["response_format"] == {"type": "json_object"}
    assert engine.constraints[-1] is not None and not engine.constraints[-1].strict
    with pytest.raises(ValueError, match="unknown method"):
        ChatCore(backend=service).with_structured_output(Person, method="xml")


def test_request_fields_and_per_call_overrides(scripted):
    service = scripted()
    llm = ChatCore(backend=service, temperature=0.2, max_tokens=9, top_p=0.5, stop=["END"])
    llm.invoke("hi")
    assert {
        k: service.requests[-1][k] for k in ("model", "temperature", "max_tokens", "top_p", "stop")
    } == {
        "model": "core-1-mini-chat",
        "temperature": 0.2,
        "max_tokens": 9,
        "top_p": 0.5,
        "stop": ["END"],
    }
    message = llm.invoke("hi", stop=["x"], model="core-1-mini-chat-ja", temperature=0, seed=7)
    request = service.requests[-1]
    assert (request["stop"], request["model"], request["temperature"], request["seed"]) == (
        ["x"],
        "core-1-mini-chat-ja",
        0,
        7,
    )
    assert message.response_metadata["model_name"] == "core-1-mini-chat-ja-240510"
    ChatCore(backend=service, stop=[]).invoke("hi")
    assert "stop" not in service.requests[-1]


def test_stop_sequence_cuts_the_reply(scripted):
    assert (
        ChatCore(backend=scripted("one, two, three")).invoke("count", stop=[", three"]).content
        == "one, two"
    )


def test_history_with_tool_calls_goes_out_in_the_wire_shape(scripted):
    service = scripted("It is 3.")
    history = [
        SystemMessage("Use tools."),
        HumanMessage("1+2?"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_9", "type": "tool_call"}
            ],
        ),
        ToolMessage("3", tool_call_id="call_9"),
    ]
    assert ChatCore(backend=service).bind_tools([add]).invoke(history).content == "It is 3."
    sent = service.requests[-1]["messages"]
    assert sent[2]["content"] is None and sent[2]["tool_calls"][0]["id"] == "call_9"
    assert sent[3] == {"role": "tool", "tool_call_id": "call_9", "content": "3"}


def test_service_errors_surface_as_typed_errors(scripted):
    with pytest.raises(BadRequestError, match="temperature"):
        ChatCore(backend=scripted(), temperature=3).invoke("hi")


async def test_async_stream_does_not_block_the_event_loop():
    class SlowEngine(ScriptedChatEngine):
        def generate(self, prompt_ids, params, should_stop=lambda: False):
            for token in super().generate(prompt_ids, params, should_stop):
                time.sleep(0.02)
                yield token

    service = InProcessBackend(
        chat_engine_instance=SlowEngine("abcdefghij"),
        embedding_engine_instance=CharCountEmbeddingEngine(),
    )
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        text = "".join([c.text async for c in ChatCore(backend=service).astream("hi")])
    finally:
        task.cancel()
    assert text == "abcdefghij"
    assert ticks >= 5  # the loop kept running during ~0.2 s of generation


# ---------------------------------------------------------------- tokens, tracing, connection


def test_token_counts_use_the_models_tokenizer():
    llm = ChatCore(backend=scripted_backend())
    assert llm.get_num_tokens("héllo") == 5  # the scripted tokenizer: one token per character
    assert llm.get_token_ids("ab") == [97, 98]
    messages = [SystemMessage("Be brief."), HumanMessage("What is 1 + 2?")]
    for tools in (None, [add]):
        bound = llm.bind_tools(tools) if tools else llm
        reported = bound.invoke(messages).usage_metadata["input_tokens"]
        assert llm.get_num_tokens_from_messages(messages, tools=tools) == reported


def test_token_counts_over_http_never_download_a_tokenizer(monkeypatch):
    import langchain_core.language_models.base as lc_base

    def no_download(*args, **kwargs):
        raise AssertionError("tried to load LangChain's GPT-2 tokenizer")

    monkeypatch.setattr(lc_base, "get_tokenizer", no_download)
    monkeypatch.setattr(lc_base, "_get_token_ids_default_method", no_download)
    monkeypatch.setattr(backend, "connect", lambda *a, **k: RemoteStub())
    llm = ChatCore(base_url="http://127.0.0.1:9")
    assert llm.get_num_tokens("Hello, world!") == estimate_token_count("Hello, world!") == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert llm.get_num_tokens_from_messages([HumanMessage("Hello, world!")]) > 4
    with pytest.raises(NotImplementedError, match="custom_get_token_ids"):
        llm.get_token_ids("hi")
    counted = ChatCore(
        base_url="http://127.0.0.1:9", custom_get_token_ids=lambda t: list(range(len(t)))
    )
    assert counted.get_num_tokens("abc") == 3


class RemoteStub(StubBackend):
    """Stands in for the HTTP client: a backend that is not in-process."""


def test_ls_params():
    llm = ChatCore(temperature=0.1, max_tokens=5, stop=["a"])
    assert llm._get_ls_params() == {
        "ls_provider": "core",
        "ls_model_name": "core-1-mini-chat",
        "ls_model_type": "chat",
        "ls_temperature": 0.1,
        "ls_max_tokens": 5,
        "ls_stop": ["a"],
    }
    assert (
        llm._get_ls_params(stop=["b"], model="core-1-mini-chat-ja")["ls_model_name"]
        == "core-1-mini-chat-ja"
    )
    assert llm._get_ls_params(stop=["b"])["ls_stop"] == ["b"]


def test_http_backend_is_built_once_with_the_client_options(monkeypatch):
    calls = []

    def fake_connect(base_url=None, api_key=None, **options):
        calls.append((base_url, api_key, options))
        return RemoteStub()

    monkeypatch.setattr(backend, "connect", fake_connect)
    llm = ChatCore(base_url="http://127.0.0.1:9", api_key="k", timeout=3.5, max_retries=1)
    assert llm._get_backend() is llm._get_backend()
    options = {"engine_url": None, "timeout": 3.5, "max_retries": 1}  # no engine named
    assert calls == [("http://127.0.0.1:9", "k", options)]


def test_in_process_backend_is_shared_and_lazy():
    from langchain_core_ext import CoreEmbeddings, CoreGroundednessCheck

    first, second = ChatCore(), ChatCore(temperature=0)
    shared = first._get_backend().inner
    assert isinstance(shared, InProcessBackend) and not shared.ready  # nothing loaded yet
    assert second._get_backend().inner is shared
    assert CoreEmbeddings()._get_backend().inner is shared
    assert CoreGroundednessCheck()._get_backend().inner is shared
    assert shared_backend(shared.config).inner is shared


def test_api_key_is_secret_and_backend_is_not_dumped():
    from langchain_core.load import dumpd

    llm = ChatCore(api_key="sekrit", backend=scripted_backend())
    assert "sekrit" not in repr(llm) and "sekrit" not in json.dumps(dumpd(llm))
    assert "backend" not in llm.model_dump()
