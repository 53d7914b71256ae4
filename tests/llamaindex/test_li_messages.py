"""The pure converters between LlamaIndex's chat types and the wire format, offline."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.tools import FunctionTool

from backend.chat.output import Finished, TextDelta, ToolCallsFound
from backend.chat.responses import fold_completion, stream_chunks
from backend.protocol.schemas import ChatCompletionRequest, FunctionCall, ToolCall, ToolDefinition
from llamaindex_core_ext.messages import (
    assistant_message,
    chat_response,
    resolve_tool_choice,
    to_core_messages,
    to_core_tool,
    tool_selections,
    usage_kwargs,
)
from llamaindex_core_ext.streaming import ChatStreamAssembler

CALL = ToolCall(
    id="call_1", function=FunctionCall(name="get_weather", arguments='{"city": "Paris"}')
)


def _valid(messages: list[dict]) -> list[dict]:
    """The converted messages, checked against the service's own request schema."""
    ChatCompletionRequest.model_validate({"model": "core-1-mini-chat", "messages": messages})
    return messages


# ---------------------------------------------------------------- requests


def test_roles_and_text_blocks():
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="Be brief."),
        ChatMessage(role=MessageRole.DEVELOPER, content="Use metric units."),
        ChatMessage(
            role=MessageRole.USER, blocks=[TextBlock(text="Hello"), TextBlock(text="there")]
        ),
        ChatMessage(role=MessageRole.CHATBOT, content="Hi!"),
        ChatMessage(role=MessageRole.MODEL, content="Anything else?"),
    ]
    assert _valid(to_core_messages(messages)) == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Use metric units."},
        {"role": "user", "content": "Hello\nthere"},  # as ChatMessage.content joins them
        {"role": "assistant", "content": "Hi!"},
        {"role": "assistant", "content": "Anything else?"},
    ]


def test_assistant_tool_calls_and_tool_results():
    messages = [
        ChatMessage(role="user", content="Weather in Paris?"),
        ChatMessage(
            role="assistant",
            blocks=[
                ToolCallBlock(
                    tool_call_id="call_1", tool_name="get_weather", tool_kwargs={"city": "Paris"}
                )
            ],
        ),
        ChatMessage(
            role="tool", content="Sunny, 21 C", additional_kwargs={"tool_call_id": "call_1"}
        ),
    ]
    converted = _valid(to_core_messages(messages))
    assert converted[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert converted[2] == {"role": "tool", "content": "Sunny, 21 C", "tool_call_id": "call_1"}


def test_string_arguments_pass_through_unchanged():
    block = ToolCallBlock(tool_call_id="c", tool_name="f", tool_kwargs='{"x": 1}')
    converted = to_core_messages([ChatMessage(role="assistant", blocks=[block])])
    assert converted[0]["tool_calls"][0]["function"]["arguments"] == '{"x": 1}'


def test_text_beside_tool_calls_becomes_its_own_message():
    # The spec wants content null beside tool_calls; the text is kept, one message earlier.
    message = ChatMessage(
        role="assistant",
        blocks=[
            TextBlock(text="Let me check."),
            ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={}),
        ],
    )
    converted = _valid(to_core_messages([ChatMessage(role="user", content="q"), message]))
    assert converted[1] == {"role": "assistant", "content": "Let me check."}
    assert converted[2]["content"] is None and converted[2]["tool_calls"][0]["id"] == "c1"


@pytest.mark.parametrize(
    "legacy_call",
    [
        CALL.model_dump(),
        SimpleNamespace(model_dump=CALL.model_dump),  # OpenAI's objects, from older histories
    ],
)
def test_tool_calls_from_additional_kwargs(legacy_call):
    message = ChatMessage(
        role="assistant", content="", additional_kwargs={"tool_calls": [legacy_call]}
    )
    converted = to_core_messages([message])
    assert converted == [{"role": "assistant", "content": None, "tool_calls": [CALL.model_dump()]}]


def test_thinking_blocks_are_not_sent():
    message = ChatMessage(
        role="assistant", blocks=[ThinkingBlock(content="hmm"), TextBlock(text="42")]
    )
    assert to_core_messages([message]) == [{"role": "assistant", "content": "42"}]


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (ChatMessage(role="user", blocks=[ImageBlock(url="http://127.0.0.1/x.png")]), "ImageBlock"),
        (ChatMessage(role=MessageRole.FUNCTION, content="{}"), "role 'function'"),
        (ChatMessage(role="tool", content="result"), "tool_call_id"),
        (
            ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_name="f", tool_kwargs={})]),
            "has no tool_call_id",
        ),
        (
            ChatMessage(role="user", blocks=[ToolCallBlock(tool_call_id="c", tool_name="f")]),
            "only assistant messages",
        ),
    ],
)
def test_unsupported_input_is_refused(message, error):
    with pytest.raises(ValueError, match=error):
        to_core_messages([message])


def test_tool_definition_from_a_function_tool():
    def get_weather(city: str, unit: str = "C") -> str:
        """Get the current weather in a city."""
        return f"Sunny in {city}"

    definition = to_core_tool(FunctionTool.from_defaults(get_weather))
    parsed = ToolDefinition.model_validate(definition)
    assert parsed.function.name == "get_weather"
    assert "current weather" in (parsed.function.description or "")
    assert parsed.function.parameters["required"] == ["city"]
    assert set(parsed.function.parameters["properties"]) == {"city", "unit"}


@pytest.mark.parametrize(
    ("tool_choice", "tool_required", "expected"),
    [
        (None, False, "auto"),
        (None, True, "required"),
        ("none", True, "none"),
        ("auto", False, "auto"),
        ("get_weather", False, {"type": "function", "function": {"name": "get_weather"}}),
        (
            {"type": "function", "function": {"name": "f"}},
            False,
            {"type": "function", "function": {"name": "f"}},
        ),
    ],
)
def test_tool_choice(tool_choice, tool_required, expected):
    assert resolve_tool_choice(tool_choice, tool_required) == expected


# ---------------------------------------------------------------- responses


def test_assistant_message_with_text():
    message = assistant_message("Hello", [])
    assert message.role == MessageRole.ASSISTANT
    assert message.content == "Hello" and message.additional_kwargs == {}


def test_assistant_message_with_tool_calls():
    message = assistant_message(None, [CALL])
    assert message.content is None
    (block,) = message.blocks
    assert isinstance(block, ToolCallBlock)
    assert (block.tool_call_id, block.tool_name, block.tool_kwargs) == (
        "call_1",
        "get_weather",
        {"city": "Paris"},
    )
    assert message.additional_kwargs["tool_calls"] == [CALL.model_dump()]
    # ...and it goes back out exactly as it came in.
    assert to_core_messages([message])[0]["tool_calls"] == [CALL.model_dump()]


def test_tool_selections():
    selections = tool_selections(assistant_message(None, [CALL]))
    assert [(s.tool_id, s.tool_name, s.tool_kwargs) for s in selections] == [
        ("call_1", "get_weather", {"city": "Paris"})
    ]
    half_written = ChatMessage(
        role="assistant",
        blocks=[ToolCallBlock(tool_call_id="c", tool_name="f", tool_kwargs='{"ci')],
    )
    assert tool_selections(half_written)[0].tool_kwargs == {}
    legacy = ChatMessage(
        role="assistant", content="", additional_kwargs={"tool_calls": [CALL.model_dump()]}
    )
    assert tool_selections(legacy)[0].tool_kwargs == {"city": "Paris"}
    assert tool_selections(assistant_message("just text", [])) == []


def _events(text: str = "", calls: list[ToolCall] | None = None):
    events = [TextDelta(part) for part in ([text[:3], text[3:]] if text else [])]
    if calls:
        events.append(ToolCallsFound(calls))
    events.append(Finished("stop", 5))
    return events


@pytest.mark.parametrize(
    ("text", "calls"),
    [("Hello world", None), ("", [CALL, CALL.model_copy(update={"id": "call_2"})])],
)
def test_stream_folds_to_the_non_streamed_response(text, calls):
    ids = {
        "completion_id": "chatcmpl-1",
        "created": 1,
        "model": "core-1-mini-chat-240502",
        "prompt_tokens": 7,
    }
    expected = chat_response(fold_completion(_events(text, calls), **ids))
    assembler = ChatStreamAssembler()
    responses = [
        assembler.add(chunk)
        for chunk in stream_chunks(_events(text, calls), include_usage=True, **ids)
    ]

    last = responses[-1]
    assert last.message == expected.message
    assert "".join(r.delta or "" for r in responses) == text
    assert (
        last.additional_kwargs
        == expected.additional_kwargs
        == {
            "prompt_tokens": 7,
            "completion_tokens": 5,
            "total_tokens": 12,
        }
    )
    assert last.raw.usage is not None and last.raw.choices == []
    if text:  # every streamed response carries the whole message so far
        assert [r.message.content for r in responses if r.delta] == [text[:3], text]


def test_usage_kwargs_without_usage():
    assert usage_kwargs(None) == {}


def test_chat_response_keeps_the_completion_as_raw():
    completion = fold_completion(
        _events("Hi"), completion_id="chatcmpl-2", created=1, model="m", prompt_tokens=3
    )
    response = chat_response(completion)
    assert response.raw is completion
    assert json.loads(response.raw.model_dump_json())["usage"]["total_tokens"] == 8
