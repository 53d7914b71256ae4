"""The engine backend's rules that need no engine: settings, calibration, choosing the backend,
and reading an engine's answers into the service's events (pure converters)."""

from __future__ import annotations

import json

import pytest

import backend
from backend.backends.local import InProcessBackend
from backend.backends.remote_engine import EngineBackend, EngineSettings, engine_api_url
from backend.backends.remote_engine.backend import engine_calibration
from backend.backends.remote_engine.chat import _events, callable_tools, engine_body
from backend.backends.remote_engine.wire import EngineCompletion
from backend.chat.output import Finished, TextDelta, ToolCallsFound
from backend.groundedness.calibration import calibration_for
from backend.protocol.errors import BadRequestError, NotFoundError, ServiceUnavailableError
from backend.protocol.schemas import ChatCompletionRequest

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def _request(**fields) -> ChatCompletionRequest:
    return ChatCompletionRequest(
        model="core-1-mini-chat", messages=[{"role": "user", "content": "Hi"}], **fields
    )


def _piece(content=None, finish=None, usage=None, tool_calls=None, delta=True) -> EngineCompletion:
    message = {"content": content, "tool_calls": tool_calls}
    choice = {("delta" if delta else "message"): message, "finish_reason": finish}
    return EngineCompletion.model_validate({"choices": [choice], "usage": usage})


@pytest.mark.parametrize(
    ("given", "api"),
    [
        ("http://h:8080", "http://h:8080/v1"),
        ("http://h:8080/v1/", "http://h:8080/v1"),
        (" https://h/x/v1 ", "https://h/x/v1"),
    ],
)
def test_engine_urls_end_in_v1(given, api):
    assert engine_api_url(given) == api


def test_settings_come_from_the_environment_and_arguments_win(monkeypatch):
    monkeypatch.setenv("CORE_ENGINE_URL", "http://chat:8000")
    monkeypatch.setenv("CORE_ENGINE_CHAT_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    monkeypatch.setenv("CORE_ENGINE_EMBEDDINGS_URL", "http://pool:8001/v1")
    monkeypatch.setenv("CORE_ENGINE_API_KEY", "k-engine")
    settings = EngineSettings.from_env(embedding_model="intfloat/multilingual-e5-small")
    assert settings.engine_url == "http://chat:8000/v1"
    assert settings.embeddings_url == "http://pool:8001/v1"
    assert settings.chat_model == "Qwen/Qwen2.5-7B-Instruct"
    assert settings.embedding_model == "intfloat/multilingual-e5-small"
    assert "k-engine" not in repr(settings)
    assert EngineSettings.from_env(chat_model="mine").chat_model == "mine"


def test_embeddings_go_to_the_chat_engine_unless_told_otherwise():
    assert EngineSettings("http://e:1").embeddings_url == "http://e:1/v1"


def test_bad_engine_options_are_refused_clearly():
    with pytest.raises(ValueError, match="engine_url"):
        EngineSettings.from_env()
    with pytest.raises(TypeError, match="unknown engine options: profile"):
        EngineSettings.from_env(engine_url="http://e:1", profile="small")
    with pytest.raises(ValueError, match="judge_calibration 'large'"):
        EngineSettings("http://e:1", judge_calibration="large")
    with pytest.raises(ValueError, match="http://"):
        EngineSettings("e:1")


def test_connect_picks_server_engine_or_in_process(monkeypatch):
    assert isinstance(backend.connect(engine_url="http://e:1"), EngineBackend)
    assert isinstance(backend.connect(profile="small"), InProcessBackend)
    monkeypatch.setenv("CORE_ENGINE_URL", "http://e:1")
    assert isinstance(backend.connect(), EngineBackend)
    monkeypatch.setenv("CORE_BASE_URL", "http://server:1")
    assert type(backend.connect()).__name__ == "HTTPBackend"  # the server wins over the env
    # An explicit engine URL wins over the environment's server.
    assert isinstance(backend.connect(engine_url="http://e:2"), EngineBackend)


def test_adapter_settings_carry_the_engine_options():
    settings = backend.ConnectionSettings(
        engine_url="http://e:1",
        chat_model="m",
        engine_api_key="secret-17",
        judge_calibration="small",
        embedding_tokenizer="/models/e5",
    )
    engine = settings.connect()
    assert isinstance(engine, EngineBackend)
    assert engine.settings.chat_model == "m" and engine.settings.engine_api_key == "secret-17"
    assert engine.settings.embedding_tokenizer == "/models/e5"
    assert "secret-17" not in settings.model_dump_json()  # the key is never serialised


def test_no_calibration_is_applied_to_an_engine_model_unasked():
    assert engine_calibration(EngineSettings("http://e:1"), "m") is None
    reused = engine_calibration(EngineSettings("http://e:1", judge_calibration="small"), "m")
    assert reused == calibration_for("small", "llama.cpp")
    mine = engine_calibration(EngineSettings("http://e:1", grounded_at=0.7), "m")
    assert (mine.grounded_at, mine.not_grounded_below) == (0.7, 0.7)


def test_an_uncalibrated_check_says_how_to_calibrate():
    service = EngineBackend(engine_url="http://127.0.0.1:9", chat_model="Qwen/Qwen2.5-7B")
    with pytest.raises(ServiceUnavailableError) as caught:
        service.check_groundedness("The sky is blue.", "The sky is blue.")
    message = caught.value.message
    assert "not calibrated for the engine's model 'Qwen/Qwen2.5-7B'" in message
    assert "grounded_at" in message and "judge_calibration='small'" in message
    assert "benchmarks.eval.calibrate --engine-url http://127.0.0.1:9" in message


def test_requests_are_validated_before_any_engine_is_asked():
    service = EngineBackend(engine_url="http://127.0.0.1:9", chat_model="m", max_retries=0)
    with pytest.raises(BadRequestError, match="messages must hold at least one message"):
        service.chat({"model": "core-1-mini-chat", "messages": []})
    with pytest.raises(NotFoundError):
        service.chat({"model": "gpt-4", "messages": [{"role": "user", "content": "Hi"}]})
    with pytest.raises(BadRequestError, match="temperature"):
        service.stream_chat({**_request().model_dump(), "temperature": 3})


def test_the_engine_request_names_its_model_and_the_spec_defaults():
    body = engine_body(_request(tools=[WEATHER], max_completion_tokens=9, stop="END"), "eng-id")
    assert body["model"] == "eng-id" and body["max_tokens"] == 9 and body["stop"] == ["END"]
    assert (body["temperature"], body["top_p"]) == (0.7, 1.0)
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert "stream" not in body and "max_completion_tokens" not in body


def test_callable_tools_follow_tool_choice():
    assert callable_tools(_request(tools=[WEATHER])) == {"get_weather"}
    assert callable_tools(_request(tools=[WEATHER], tool_choice="none")) == frozenset()
    assert callable_tools(_request()) == frozenset()


def test_a_call_written_as_text_is_parsed_by_the_project_parser():
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    events = list(
        _events(
            [_piece(text, "stop", {"prompt_tokens": 5, "completion_tokens": 7}, delta=False)],
            _request(tools=[WEATHER]),
            lambda: False,
        )
    )
    calls = [e for e in events if isinstance(e, ToolCallsFound)][0].calls
    assert calls[0].function.name == "get_weather"
    assert calls[0].function.arguments == '{"city": "Paris"}'
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert events[-1] == Finished("stop", 7, prompt_tokens=5)


def test_calls_the_engine_parsed_arrive_in_fragments_and_are_assembled():
    pieces = [
        _piece(
            tool_calls=[
                {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}
            ]
        ),
        _piece(tool_calls=[{"index": 0, "function": {"arguments": '{"city": '}}]),
        _piece(tool_calls=[{"index": 0, "function": {"arguments": '"Oslo"}'}}]),
        _piece(finish="tool_calls"),
    ]
    events = list(_events(pieces, _request(tools=[WEATHER]), lambda: False))
    (found,) = [e for e in events if isinstance(e, ToolCallsFound)]
    assert found.calls[0].id == "call_1" and found.calls[0].function.arguments == '{"city": "Oslo"}'
    assert events[-1].reason == "stop"  # the engine's "tool_calls" is the spec's "stop"


def test_stop_sequences_and_length_are_the_finish_reasons():
    pieces = [_piece("one two "), _piece("END three"), _piece(finish="stop")]
    events = list(_events(pieces, _request(stop=["END"]), lambda: False))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "one two "
    assert events[-1].reason == "stop"
    pieces = [_piece("one"), _piece(" two", finish="length")]
    events = list(_events(pieces, _request(), lambda: False))
    assert events[-1] == Finished("length", 2, prompt_tokens=None)


@pytest.mark.parametrize(("given", "sent"), [({}, None), ({"parallel_tool_calls": False}, False)])
def test_parallel_tool_calls_is_passed_on_to_the_engine_when_given(given, sent):
    body = engine_body(_request(tools=[WEATHER], **given), "eng-id")
    assert body.get("parallel_tool_calls") is sent


def _two_engine_calls(streamed: bool) -> list[EngineCompletion]:
    calls = [
        {"index": i, "id": f"call_{i}", "function": {"name": "get_weather", "arguments": args}}
        for i, args in enumerate(['{"city": "Oslo"}', '{"city": "Rome"}'])
    ]
    if streamed:
        return [_piece(tool_calls=[call]) for call in calls] + [_piece(finish="tool_calls")]
    return [_piece(tool_calls=calls, finish="tool_calls", delta=False)]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ({}, ["call_0", "call_1"]),
        ({"parallel_tool_calls": False}, ["call_0"]),
        ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, ["call_0"]),
    ],
)
def test_calls_the_engine_parsed_are_kept_as_parallel_tool_calls_allows(streamed, given, kept):
    request = _request(tools=[WEATHER], **given)
    events = list(_events(_two_engine_calls(streamed), request, lambda: False))
    (found,) = [e for e in events if isinstance(e, ToolCallsFound)]
    assert [c.id for c in found.calls] == kept


def test_calls_the_engine_wrote_as_text_are_kept_as_parallel_tool_calls_allows():
    text = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
    )
    for given, cities in [({}, ["Oslo", "Rome"]), ({"parallel_tool_calls": False}, ["Oslo"])]:
        pieces = [_piece(text, "stop", delta=False)]
        events = list(_events(pieces, _request(tools=[WEATHER], **given), lambda: False))
        (found,) = [e for e in events if isinstance(e, ToolCallsFound)]
        assert [json.loads(c.function.arguments)["city"] for c in found.calls] == cities
