"""Converting between LangChain messages and the service's wire format (pure functions).

Requests: LangChain messages become the JSON-shaped message dicts of spec 2.2 (an
``AIMessage`` with tool calls gets ``content`` null, a ``ToolMessage`` the ``tool`` role).
Responses: a ``ChatCompletion`` becomes an ``AIMessage``; each ``ChatCompletionChunk`` an
additive ``AIMessageChunk`` (tool-call fragments as ``tool_call_chunks``, usage on the last).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import invalid_tool_call, tool_call_chunk
from langchain_core.output_parsers.openai_tools import parse_tool_call
from langchain_core.outputs import ChatGenerationChunk

from backend.protocol.schemas import ChatCompletion, ChatCompletionChunk, Usage

MODEL_PROVIDER = "core"

# Content blocks of an AI message that are not text and are not sent back: tool calls go
# out as ``tool_calls``; reasoning stays with the model that produced it.
_SKIPPED_AI_BLOCKS = frozenset(
    {"tool_use", "tool_call", "tool_call_chunk", "invalid_tool_call", "reasoning", "thinking"}
)
# Roles a generic ``ChatMessage`` may carry (a tool answer needs a ``ToolMessage``).
_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
}


# ---------------------------------------------------------------- LangChain -> wire


def content_text(content: str | list[str | dict[str, Any]], *, ai: bool = False) -> str:
    """The text of a message's content: a string, or its text blocks joined.

    Raises:
        ValueError: a block the text-only models cannot read (an image, a file, audio...).
    """
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif ai and kind in _SKIPPED_AI_BLOCKS:
            continue
        else:
            raise ValueError(
                f"content blocks of type {kind!r} are not supported: the core chat models "
                "read text only"
            )
    return "".join(parts)


def tool_call_to_wire(call: ToolCall | InvalidToolCall) -> dict[str, Any]:
    """A LangChain tool call as spec 2.3's tool call (arguments as a JSON string)."""
    if call.get("type") == "invalid_tool_call":
        arguments = call.get("args") or "{}"
    else:
        arguments = json.dumps(call["args"], ensure_ascii=False)
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": call["name"], "arguments": arguments},
    }


def message_to_wire(message: BaseMessage) -> dict[str, Any]:
    """One LangChain message as the service's message dict (spec 2.2).

    Raises:
        ValueError: a message type or role the service does not take, or non-text content.
    """
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content_text(message.content)}
    if isinstance(message, HumanMessage):
        wire: dict[str, Any] = {"role": "user", "content": content_text(message.content)}
        if message.name:
            wire["name"] = message.name
        return wire
    if isinstance(message, AIMessage):
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        if calls:
            # Spec 2.2: content must be null beside tool_calls; any text said before the
            # calls is dropped.
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [tool_call_to_wire(call) for call in calls],
            }
        return {"role": "assistant", "content": content_text(message.content, ai=True)}
    if isinstance(message, ToolMessage):
        if isinstance(message.content, list) and not all(
            isinstance(b, str) or b.get("type") == "text" for b in message.content
        ):
            text = json.dumps(message.content, ensure_ascii=False)
        else:
            text = content_text(message.content)
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
    if isinstance(message, ChatMessage):
        role = _ROLES.get(message.role)
        if role is None:
            raise ValueError(
                f"message role {message.role!r} is not supported; use system, user or assistant"
            )
        return {"role": role, "content": content_text(message.content, ai=role == "assistant")}
    raise ValueError(f"message type {type(message).__name__} is not supported by the core service")


def messages_to_wire(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [message_to_wire(m) for m in messages]


# ---------------------------------------------------------------- wire -> LangChain


def usage_to_metadata(usage: Usage) -> UsageMetadata:
    return UsageMetadata(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def completion_to_message(completion: ChatCompletion) -> AIMessage:
    """The first choice of a completion as an ``AIMessage`` with usage and metadata.

    ``response_metadata`` carries the versioned ``model_name`` and the ``finish_reason``.
    Tool calls whose arguments are not a JSON object become ``invalid_tool_calls``.
    """
    choice = completion.choices[0]
    tool_calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for raw in choice.message.tool_calls or ():
        raw_dict = raw.model_dump()
        try:
            tool_calls.append(parse_tool_call(raw_dict, return_id=True))  # type: ignore[arg-type]
        except OutputParserException as exc:
            invalid.append(
                invalid_tool_call(
                    name=raw.function.name,
                    args=raw.function.arguments,
                    id=raw.id,
                    error=str(exc),
                )
            )
    metadata: dict[str, Any] = {
        "model_name": completion.model,
        "finish_reason": choice.finish_reason,
        "model_provider": MODEL_PROVIDER,
    }
    if completion.system_fingerprint:
        metadata["system_fingerprint"] = completion.system_fingerprint
    return AIMessage(
        content=choice.message.content or "",
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        id=completion.id,
        usage_metadata=usage_to_metadata(completion.usage),
        response_metadata=metadata,
    )


def chunk_to_generation(chunk: ChatCompletionChunk) -> ChatGenerationChunk:
    """One streamed chunk as an additive ``ChatGenerationChunk``.

    The finish chunk's ``generation_info`` holds ``finish_reason`` and ``model_name``
    (LangChain merges it into ``response_metadata``); only that chunk sets them, so they are
    not concatenated when chunks are added. A chunk with log-probabilities has them there
    too, under ``logprobs`` (``{"content": [...]}``, whose lists add up as chunks are added,
    as ``ChatOpenAI``'s). The usage chunk (empty ``choices``) carries ``usage_metadata``.
    """
    usage = usage_to_metadata(chunk.usage) if chunk.usage else None
    info: dict[str, Any] = {}
    content = ""
    tool_call_chunks = []
    if chunk.choices:
        choice = chunk.choices[0]
        content = choice.delta.content or ""
        tool_call_chunks = [
            tool_call_chunk(
                name=delta.function.name,
                args=delta.function.arguments,
                id=delta.id,
                index=delta.index,
            )
            for delta in choice.delta.tool_calls or ()
        ]
        if choice.finish_reason is not None:
            info = {"finish_reason": choice.finish_reason, "model_name": chunk.model}
        if choice.logprobs is not None:
            info["logprobs"] = choice.logprobs.model_dump()
    message = AIMessageChunk(
        content=content,
        tool_call_chunks=tool_call_chunks,
        usage_metadata=usage,
        id=chunk.id,
        response_metadata={"model_provider": MODEL_PROVIDER},
    )
    return ChatGenerationChunk(message=message, generation_info=info or None)
