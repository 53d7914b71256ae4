"""The pure converters between LangChain messages and the wire format (offline)."""

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from backend.protocol.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Choice,
    ChunkChoice,
    Delta,
    FunctionCall,
    FunctionCallDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from backend.protocol.validation import check_chat_request, parse_request
from langchain_core_ext.messages import (
    chunk_to_generation,
    completion_to_message,
    content_text,
    message_to_wire,
    messages_to_wire,
)

CALL = {"name": "add", "args": {"a": 1, "b": "ü"}, "id": "call_1", "type": "tool_call"}


def test_basic_roles():
    assert messages_to_wire(
        [SystemMessage("be brief"), HumanMessage("hi", name="ann"), AIMessage("hello")]
    ) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi", "name": "ann"},
        {"role": "assistant", "content": "hello"},
    ]


def test_ai_message_with_tool_calls_has_null_content_and_json_arguments():
    wire = message_to_wire(AIMessage("I will call add", tool_calls=[CALL]))
    assert wire == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 1, "b": "ü"}'},
            }
        ],
    }
    assert json.loads(wire["tool_calls"][0]["function"]["arguments"]) == CALL["args"]


def test_invalid_tool_calls_are_sent_back_with_their_raw_arguments():
    message = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "add",
                "args": "{oops",
                "id": "c2",
                "error": "bad",
                "type": "invalid_tool_call",
            }
        ],
    )
    assert message_to_wire(message)["tool_calls"][0]["function"] == {
        "name": "add",
        "arguments": "{oops",
    }


def test_tool_message_becomes_tool_role():
    assert message_to_wire(ToolMessage("3", tool_call_id="call_1", name="add")) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "3",
    }
    structured = message_to_wire(
        ToolMessage([{"type": "json", "json": {"x": 1}}], tool_call_id="c")
    )
    assert json.loads(structured["content"]) == [{"type": "json", "json": {"x": 1}}]


def test_text_blocks_are_joined_and_ai_tool_blocks_skipped():
    assert content_text(["a", {"type": "text", "text": "b"}]) == "ab"
    blocks = [
        {"type": "text", "text": "hm"},
        {"type": "tool_use", "id": "x", "name": "f", "input": {}},
    ]
    assert message_to_wire(AIMessage(blocks))["content"] == "hm"


def test_images_are_refused_explicitly():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with pytest.raises(ValueError, match="text only"):
        message_to_wire(HumanMessage([{"type": "text", "text": "look"}, image]))


def test_generic_roles_and_unsupported_types():
    assert message_to_wire(ChatMessage("x", role="developer")) == {"role": "system", "content": "x"}
    with pytest.raises(ValueError, match="role 'critic'"):
        message_to_wire(ChatMessage("x", role="critic"))
    with pytest.raises(ValueError, match="FunctionMessage"):
        message_to_wire(FunctionMessage("x", name="f"))


def test_a_tool_conversation_is_a_valid_request():
    wire = messages_to_wire(
        [
            HumanMessage("1+2?"),
            AIMessage("", tool_calls=[CALL]),
            ToolMessage("3", tool_call_id="call_1"),
        ]
    )
    request = parse_request(ChatCompletionRequest, {"model": "core-1-mini-chat", "messages": wire})
    check_chat_request(request)  # raises on a broken tool-call flow


def _completion(message: AssistantMessage, finish="stop") -> ChatCompletion:
    return ChatCompletion(
        id="chatcmpl-1",
        created=0,
        model="core-1-mini-chat-240502",
        choices=[Choice(message=message, finish_reason=finish)],
        usage=Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10),
    )


def test_completion_to_message_text_usage_and_metadata():
    message = completion_to_message(_completion(AssistantMessage(content="Hi!"), finish="length"))
    assert message.content == "Hi!"
    assert message.id == "chatcmpl-1"
    assert message.usage_metadata == {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
    assert message.response_metadata["model_name"] == "core-1-mini-chat-240502"
    assert message.response_metadata["finish_reason"] == "length"


def test_completion_to_message_tool_calls_valid_and_invalid():
    calls = [
        ToolCall(id="c1", function=FunctionCall(name="add", arguments='{"a": 1}')),
        ToolCall(id="c2", function=FunctionCall(name="add", arguments="not json")),
    ]
    message = completion_to_message(_completion(AssistantMessage(content=None, tool_calls=calls)))
    assert message.content == ""
    assert message.tool_calls == [
        {"name": "add", "args": {"a": 1}, "id": "c1", "type": "tool_call"}
    ]
    assert [c["id"] for c in message.invalid_tool_calls] == ["c2"]
    assert message.invalid_tool_calls[0]["args"] == "not json"


def _chunk(delta=None, finish=None, usage=None) -> ChatCompletionChunk:
    choices = [] if delta is None else [ChunkChoice(delta=delta, finish_reason=finish)]
    return ChatCompletionChunk(
        id="chatcmpl-2", created=0, model="core-1-mini-chat-240502", choices=choices, usage=usage
    )


def test_chunks_add_up_to_the_message():
    chunks = [
        _chunk(Delta(role="assistant", content="")),
        _chunk(
            Delta(
                tool_calls=[
                    ToolCallDelta(
                        index=0,
                        id="c1",
                        type="function",
                        function=FunctionCallDelta(name="add", arguments=""),
                    )
                ]
            )
        ),
        _chunk(
            Delta(
                tool_calls=[
                    ToolCallDelta(index=0, function=FunctionCallDelta(arguments='{"a": 1}'))
                ]
            )
        ),
        _chunk(Delta(), finish="stop"),
        _chunk(usage=Usage(prompt_tokens=5, completion_tokens=2, total_tokens=7)),
    ]
    generations = [chunk_to_generation(c) for c in chunks]
    assert generations[1].message.tool_call_chunks[0]["index"] == 0
    assert generations[1].message.tool_call_chunks[0]["name"] == "add"
    assert generations[3].generation_info == {
        "finish_reason": "stop",
        "model_name": "core-1-mini-chat-240502",
    }
    assert [g.generation_info for g in generations].count(None) == 4  # only the finish sets it
    full = generations[0]
    for generation in generations[1:]:
        full += generation
    assert full.message.tool_calls == [
        {"name": "add", "args": {"a": 1}, "id": "c1", "type": "tool_call"}
    ]
    assert full.message.usage_metadata == {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
    assert full.message.response_metadata["model_provider"] == "core"
