"""What ``POST /v1/core/chat/completions`` answers (spec 2.5, 2.6): the whole completion, its
streamed chunks, their usage and log-probabilities; a groundedness check answers with its
``Verdict`` as the message content."""

from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import Field

from backend.protocol.schemas.base import ResponseModel
from backend.protocol.schemas.tools import ToolCall

FinishReason = Literal["stop", "length"]
Verdict = Literal["grounded", "notGrounded", "notSure"]


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def new_tool_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


class Usage(ResponseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class TopLogprob(ResponseModel):
    """One of the most likely tokens at a position (OpenAI's shape)."""

    token: str = Field(description="The token's text (its bytes as UTF-8, with replacement).")
    logprob: float
    bytes: list[int] | None = Field(
        default=None, description="The token's raw UTF-8 bytes (a character may span tokens)."
    )


class TokenLogprob(TopLogprob):
    """An output token, its log-probability and the most likely tokens at its position."""

    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChoiceLogprobs(ResponseModel):
    """``choices[].logprobs`` when the request asked for them (null otherwise)."""

    content: list[TokenLogprob] | None = Field(
        default=None, description="The output tokens, in order."
    )


class AssistantMessage(ResponseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] | None = None


class Choice(ResponseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = Field(
        default=None, description="null unless the request set logprobs."
    )
    finish_reason: FinishReason


class ChatCompletion(ResponseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str = Field(description="The versioned model name actually used.")
    system_fingerprint: str | None = None
    choices: list[Choice]
    usage: Usage


class FunctionCallDelta(ResponseModel):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(ResponseModel):
    index: int = Field(description="Position of the call in the message (OpenAI convention).")
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionCallDelta


class Delta(ResponseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(ResponseModel):
    index: int = 0
    delta: Delta
    logprobs: ChoiceLogprobs | None = Field(
        default=None, description="With logprobs: the entries of the tokens behind this delta."
    )
    finish_reason: FinishReason | None = None


class ChatCompletionChunk(ResponseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChunkChoice]
    usage: Usage | None = Field(
        default=None, description="Only on the last chunk, when stream_options.include_usage."
    )
