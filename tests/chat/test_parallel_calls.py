"""Several tool calls in one reply, offline: each streamed under its own index and id, the
non-streamed message equal to the folded stream, ``parallel_tool_calls: false`` keeping the
first, and the tool-need check over every call."""

from __future__ import annotations

import json

import pytest

from backend.backends.local import InProcessBackend
from backend.chat.prompt import AnswerOrCall, render_prompt
from backend.chat.tool_calls import MAX_CALLS, SEVERAL_CALLS_FORMAT
from backend.protocol.schemas import ChatMessage, ToolChoiceObject, ToolDefinition
from backend.testing import ScriptedChatEngine, offline_backend
from backend.testing.engines import CharTokenizer, yes_or_no_logprobs
from tests.chat.test_chat_pipeline import WEATHER_TOOL, _fold_stream
from tests.chat.test_constrained_calls import EVENT, WEATHER

TWO_CALLS = (
    '<tool_call>\n[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
    '{"name": "get_weather", "arguments": {"city": "Tokyo"}}]\n</tool_call>'
)
CITIES = [{"city": "Paris"}, {"city": "Tokyo"}]


def _service(engine) -> InProcessBackend:
    return offline_backend(engine, profile="small")


def _request(**extra):
    return {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": "Weather in Paris and in Tokyo?"}],
        "tools": [WEATHER_TOOL],
        **extra,
    }


@pytest.mark.parametrize("extra", [{}, {"parallel_tool_calls": True}])
def test_two_calls_stream_with_their_own_index_and_id_and_fold_to_the_message(extra):
    service = _service(ScriptedChatEngine(TWO_CALLS))
    completion = service.chat(_request(**extra))
    message = completion.choices[0].message
    chunks = list(service.stream_chat(_request(**extra)))
    content, calls, finish, _ = _fold_stream(chunks)

    assert message.content is None and content == ""
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("get_weather", city) for city in CITIES
    ]
    # the folded stream is the message (ids are drawn per response, so compared for shape)
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c.function.name, c.function.arguments) for c in message.tool_calls
    ]
    assert finish == completion.choices[0].finish_reason == "stop"  # the spec's two reasons
    deltas = [
        d for chunk in chunks for choice in chunk.choices for d in choice.delta.tool_calls or ()
    ]
    opening = [d for d in deltas if d.id is not None]
    assert [d.index for d in opening] == [0, 1]
    assert all(d.type == "function" and d.function.name == "get_weather" for d in opening)
    assert len({d.id for d in opening}) == 2
    assert len({c.id for c in message.tool_calls}) == 2


def test_parallel_tool_calls_false_keeps_the_first_call_streamed_or_not():
    service = _service(ScriptedChatEngine(TWO_CALLS))
    message = service.chat(_request(parallel_tool_calls=False)).choices[0].message
    _, calls, finish, _ = _fold_stream(service.stream_chat(_request(parallel_tool_calls=False)))
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == CITIES[:1]
    assert [json.loads(c["arguments"]) for c in calls] == CITIES[:1]
    assert finish == "stop"


class TwoToolEngine(ScriptedChatEngine):
    """Opens a call; under the call constraint writes one call to each of ``get_weather`` and
    ``create_event``; answers ``Hello there.`` without tools; and to the tool-need question
    says yes for the tools in ``needed``."""

    CALLS = (
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "create_event", "arguments": {"day": "monday", "people": 2}}]'
    )

    def __init__(self, needed: set[str]) -> None:
        super().__init__(constrains=True)
        self.needed = needed
        self.asked: list[str] = []

    def reply_for(self, prompt: str) -> str:
        if "tools:" not in prompt:
            return "Hello there."
        return self.CALLS if self.constraints[-1] is not None else '<tool_call>\n{"name"'

    def next_token_logprobs(self, prompt_ids, candidate_ids):
        question = self.tokenizer.decode(prompt_ids)
        [name] = [n for n in ("get_weather", "create_event") if f'"{n}"' in question]
        self.asked.append(name)
        return yes_or_no_logprobs(name in self.needed, candidate_ids)


@pytest.mark.parametrize(
    ("needed", "asked", "kept"),
    [
        (set(), ["get_weather", "create_event"], False),  # no tool needed: a plain answer
        ({"create_event"}, ["get_weather", "create_event"], True),  # one needed: both kept
        ({"get_weather"}, ["get_weather"], True),  # the first needed: the rest not asked
    ],
)
def test_a_reply_of_several_calls_is_kept_whole_when_any_tool_is_needed(needed, asked, kept):
    engine = TwoToolEngine(needed)
    service = offline_backend(engine, profile="default")
    body = {
        "model": "core-1-mini-chat",
        "messages": [{"role": "user", "content": "Weather in Paris, and book Monday for two?"}],
        "tools": [WEATHER, EVENT],
    }
    message = service.chat(body).choices[0].message
    assert engine.asked == asked
    if kept:
        assert [c.function.name for c in message.tool_calls] == ["get_weather", "create_event"]
    else:
        assert message.tool_calls is None and message.content == "Hello there."


@pytest.mark.parametrize("stream", [False, True])
def test_an_array_cut_by_max_tokens_keeps_its_complete_calls(stream):
    cut = TWO_CALLS.index('{"name"', 20) + 12  # inside the second call
    service = _service(ScriptedChatEngine(TWO_CALLS))
    request = _request(max_tokens=cut)
    if stream:
        content, folded, finish, _ = _fold_stream(list(service.stream_chat(request)))
        calls = [(call["name"], json.loads(call["arguments"])) for call in folded]
    else:
        choice = service.chat(request).choices[0]
        content, finish = choice.message.content, choice.finish_reason
        calls = [
            (c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls
        ]
    assert not content
    assert calls == [("get_weather", {"city": "Paris"})]
    assert finish == "length"


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_keeps_at_most_max_calls_calls(stream):
    cities = [f"City {n}" for n in range(MAX_CALLS + 1)]
    calls = [{"name": "get_weather", "arguments": {"city": city}} for city in cities]
    service = _service(ScriptedChatEngine(f"<tool_call>\n{json.dumps(calls)}\n</tool_call>"))
    if stream:
        _, folded, _, _ = _fold_stream(list(service.stream_chat(_request())))
        kept = [json.loads(call["arguments"])["city"] for call in folded]
    else:
        message = service.chat(_request()).choices[0].message
        kept = [json.loads(c.function.arguments)["city"] for c in message.tool_calls]
    assert kept == cities[:MAX_CALLS]


def test_an_array_cut_before_any_call_is_whole_stays_text():
    cut = TWO_CALLS.index("Paris")
    completion = _service(ScriptedChatEngine(TWO_CALLS)).chat(_request(max_tokens=cut))
    message = completion.choices[0].message
    assert message.tool_calls is None and message.content == TWO_CALLS[:cut]
    assert completion.choices[0].finish_reason == "length"


def _system_line(prompt_ids) -> bool:
    return SEVERAL_CALLS_FORMAT in CharTokenizer().decode(prompt_ids)


@pytest.mark.parametrize(
    ("tool_choice", "parallel", "constrained", "told"),
    [
        ("auto", True, True, True),
        ("required", True, True, True),
        ("auto", False, True, False),  # at most one call: no array to describe
        ({"type": "function", "function": {"name": "get_weather"}}, True, True, False),
        ("auto", True, False, False),  # unconstrained: the template's own format is parsed
        ("none", True, True, False),
    ],
)
def test_the_array_of_calls_is_described_only_where_a_constrained_reply_may_hold_several(
    tool_choice, parallel, constrained, told
):
    tool = ToolDefinition.model_validate(WEATHER_TOOL)
    choice = tool_choice if isinstance(tool_choice, str) else ToolChoiceObject(**tool_choice)
    prompt = render_prompt(
        CharTokenizer(),
        [ChatMessage(role="user", content="Weather in Paris and in Tokyo?")],
        [tool],
        choice,
        constrained=constrained,
        parallel_calls=parallel,
    )
    assert _system_line(prompt.ids) is told
    if isinstance(prompt, AnswerOrCall):
        assert _system_line(prompt.call.ids) is told
        # A dropped call is replaced by the answer without tools.
        assert not _system_line(prompt.plain.ids)
