"""The shared chat post-processing on an offline scripted engine: streaming and
non-streaming agree, stop sequences, length limits, tool calls and the usage chunk."""

import json

import pytest

from backend.backends.local import InProcessBackend
from backend.chat.output import Finished, OutputProcessor, TextDelta, ToolCallsFound
from backend.protocol.errors import BadRequestError
from backend.testing import EOS, CharTokenizer, ScriptedChatEngine, offline_backend
from tests.server.helpers import SlowChatEngine

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _service(reply: str) -> InProcessBackend:
    return offline_backend(ScriptedChatEngine(reply), profile="small")


def _request(**extra):
    return {"model": "core-1-mini-chat", "messages": [{"role": "user", "content": "hi"}], **extra}


def _fold_stream(chunks):
    content, calls, finish, usage = "", {}, None, None
    for chunk in chunks:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for delta in choice.delta.tool_calls or ():
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = call["id"] or delta.id
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
            finish = choice.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, usage


@pytest.mark.parametrize(
    ("reply", "extra"),
    [
        ("Hello there, how are you?", {}),
        ("Hello there, how are you?", {"stop": ["how"]}),
        ("Hello there, how are you?", {"max_tokens": 7}),
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Seoul"}}\n</tool_call>',
            {"tools": [WEATHER_TOOL]},
        ),
        ("It is sunny.", {"tools": [WEATHER_TOOL]}),
    ],
)
def test_stream_concatenates_to_the_non_streamed_message(reply, extra):
    service = _service(reply)
    completion = service.chat(_request(**extra))
    content, calls, finish, usage = _fold_stream(
        service.stream_chat(_request(stream_options={"include_usage": True}, **extra))
    )
    message = completion.choices[0].message
    assert content == (message.content or "")
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c.function.name, c.function.arguments) for c in message.tool_calls or ()
    ]
    assert finish == completion.choices[0].finish_reason
    assert usage == completion.usage


def test_stream_structure_one_id_role_first_usage_last():
    service = _service("Hi!")
    chunks = list(service.stream_chat(_request(stream_options={"include_usage": True})))
    assert len({(c.id, c.created) for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(
        c.object == "chat.completion.chunk" and c.model == "core-1-mini-chat-240502" for c in chunks
    )
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 4  # "Hi!" + EOS
    assert all(c.usage is None for c in chunks[:-1])


def test_no_usage_chunk_unless_asked():
    chunks = list(_service("Hi!").stream_chat(_request()))
    assert chunks[-1].choices[0].finish_reason == "stop" and all(c.usage is None for c in chunks)


def test_stop_sequence_is_cut_and_finish_is_stop():
    result = _service("one two three four").chat(_request(stop=["three", "tw"]))
    assert result.choices[0].message.content == "one "
    assert result.choices[0].finish_reason == "stop"


def test_max_tokens_gives_length():
    result = _service("one two three four").chat(_request(max_tokens=3))
    assert result.choices[0].message.content == "one"
    assert result.choices[0].finish_reason == "length"
    assert result.usage.completion_tokens == 3
    assert result.usage.total_tokens == result.usage.prompt_tokens + 3


def test_tool_call_response_shape():
    reply = '{"name": "get_weather", "arguments": {"city": "Seoul"}}'
    result = _service(reply).chat(_request(tools=[WEATHER_TOOL]))
    message = result.choices[0].message
    assert message.content is None
    assert message.tool_calls[0].function.name == "get_weather"
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Seoul"}


def test_forced_tool_choice_prefills_the_call_opening():
    engine = ScriptedChatEngine('{"city": "Paris"}}\n</tool_call>')
    service = offline_backend(engine, profile="small")
    forced = {"type": "function", "function": {"name": "get_weather"}}
    result = service.chat(_request(tools=[WEATHER_TOOL], tool_choice=forced))
    prompt = engine.tokenizer.decode(engine.prompts[-1])
    assert prompt.endswith('<tool_call>\n{"name": "get_weather", "arguments":')
    [call] = result.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {
        "city": "Paris"
    }


def test_tool_choice_none_hides_the_tools():
    engine = ScriptedChatEngine('{"name": "get_weather", "arguments": {"city": "Seoul"}}')
    service = offline_backend(engine, profile="small")
    result = service.chat(_request(tools=[WEATHER_TOOL], tool_choice="none"))
    assert result.choices[0].message.tool_calls is None
    assert "get_weather" not in engine.tokenizer.decode(engine.prompts[-1]).split("\n")[0]


def test_processor_holds_a_stop_prefix_split_across_tokens():
    tok = CharTokenizer()
    processor = OutputProcessor(tok, frozenset({EOS}), stop=["END"])
    out = []
    for ch in "abcENxyzEND tail":
        out += processor.feed(ord(ch))
        if processor.stopped:
            break
    out += processor.finish()
    text = "".join(e.text for e in out if isinstance(e, TextDelta))
    assert text == "abcENxyz"
    assert out[-1] == Finished("stop", len("abcENxyzEND"))


def test_processor_holds_text_while_it_may_be_a_call_and_releases_it_once_ruled_out():
    tok = CharTokenizer()
    processor = OutputProcessor(tok, frozenset({EOS}), tool_names=frozenset({"f"}))
    held = [event for ch in '{"' for event in processor.feed(ord(ch))]
    assert held == []  # '{"' may still open '{"name"': held back
    released = processor.feed(ord("x"))
    assert released == [TextDelta('{"x')]  # ruled out: what was held goes out at once
    events = released + [e for ch in '": 1}' for e in processor.feed(ord(ch))]
    events += processor.feed(EOS) + processor.finish()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == '{"x": 1}'
    assert not any(isinstance(e, ToolCallsFound) for e in events)


def test_processor_holds_a_whole_call_and_parses_it_once_at_the_end():
    tok = CharTokenizer()
    processor = OutputProcessor(tok, frozenset({EOS}), tool_names=frozenset({"f"}))
    call = '{"name": "f", "arguments": {"a": 1}}'
    assert [e for ch in call for e in processor.feed(ord(ch))] == []
    [found, finished] = processor.feed(EOS) + processor.finish()
    assert isinstance(found, ToolCallsFound) and found.calls[0].function.name == "f"
    assert finished == Finished("stop", len(call) + 1)


async def test_async_twins_match_sync():
    service = _service("Hello async world")
    sync = service.chat(_request())
    result = await service.achat(_request())
    assert result.choices[0].message.content == sync.choices[0].message.content
    chunks = [c async for c in await service.astream_chat(_request())]
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        == "Hello async world"
    )
    embedded = await service.aembed(
        {"model": "core-embedding-1-large-query", "input": ["abc", "xyz"]}
    )
    assert [d.index for d in embedded.data] == [0, 1]


async def test_async_stream_stops_generation_when_the_consumer_leaves():
    engine = ScriptedChatEngine("x" * 2000)
    service = offline_backend(engine, profile="small")
    stream = await service.astream_chat(_request())
    async for _ in stream:
        break
    await stream.aclose()
    assert engine.generated < 2000


def test_closing_a_stream_stops_the_generation():
    engine = SlowChatEngine("x" * 2000)
    service = offline_backend(engine, profile="small")
    with service.stream_chat(_request()) as stream:
        first = [next(stream), next(stream)]
        assert engine.started.is_set() and not engine.finished.is_set()
    assert first[1].choices[0].delta.content == "x"
    assert engine.finished.is_set()  # the engine's generation was closed with the stream
    assert engine.generated < 2000
    assert list(stream) == []  # a closed stream yields nothing more


def test_a_conversation_being_trimmed_can_be_counted_though_not_sent():
    service = _service("x")
    trimmed = {
        "model": "core-1-mini-chat",
        "messages": [
            {"role": "tool", "tool_call_id": "call_a", "content": "12"},  # its call was cut
            {"role": "user", "content": "hi"},
        ],
    }
    with pytest.raises(BadRequestError, match="no earlier assistant message called"):
        service.chat(trimmed)
    whole = {**trimmed, "messages": trimmed["messages"][1:]}
    assert service.count_prompt_tokens(trimmed) > service.count_prompt_tokens(whole)
    assert service.count_prompt_tokens(whole) == service.chat(whole).usage.prompt_tokens


@pytest.mark.parametrize(
    ("text", "reason"),
    [('{"a": "abcd", "b": [1, 2]}', "stop"), ('{"a": "abcde"}', "length")],
)
def test_constrained_output_that_reached_a_bound_finishes_with_length(text, reason):
    """A value the masks made end (``backend.engines.json_bounds``) ends its turn, but was
    cut short: the caller is told as for ``max_tokens``."""
    from backend.engines.json_bounds import JSONBounds

    bounds = JSONBounds(string_chars=5, total_chars=100)
    processor = OutputProcessor(CharTokenizer(), frozenset({EOS}), json_bounds=bounds)
    events = [e for ch in text for e in processor.feed(ord(ch))]
    events += processor.feed(EOS) + processor.finish()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
    assert events[-1] == Finished(reason, len(text) + 1)
