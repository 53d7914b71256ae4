"""The service's wire format (spec sections 2.2-2.8 and the request bodies of 4.1-4.3).

Request models ignore unknown fields, because OpenAI-style clients send extras (``user``,
``presence_penalty``, ...); the useful extras are supported and documented on their fields.
Response models serialise exactly the spec's objects.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length"]
Verdict = Literal["grounded", "notGrounded", "notSure"]

#: The most alternatives ``top_logprobs`` may ask for (OpenAI's limit).
MAX_TOP_LOGPROBS = 20


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore")


# ---------------------------------------------------------------- tool calls (2.3, 2.4)


class FunctionCall(_Response):
    name: str = Field(description="Function name.")
    arguments: str = Field(description="The arguments as a JSON string.")


class ToolCall(_Response):
    id: str = Field(description="Identifier of the tool call.")
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDefinition(_Request):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] = Field(
        description="Input parameters as a JSON Schema object (type, properties, required)."
    )


class ToolDefinition(_Request):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class ToolChoiceFunction(_Request):
    name: str


class ToolChoiceObject(_Request):
    type: Literal["function"] = "function"
    function: ToolChoiceFunction


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceObject


# ---------------------------------------------------------------- response_format (OpenAI's)


class JSONSchemaFormat(_Request):
    """``response_format.json_schema``: the schema every answer must validate against."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, serialize_by_alias=True)

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    schema_: dict[str, Any] = Field(
        default_factory=dict, alias="schema", description="A JSON Schema (default: any object)."
    )
    strict: bool | None = Field(
        default=None, description="Accepted as OpenAI's; answers always follow the schema."
    )


class ResponseFormat(_Request):
    """``{"type": "text"}`` (default), ``{"type": "json_object"}`` (one JSON object), or
    ``{"type": "json_schema", "json_schema": {...}}`` (valid against the schema)."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JSONSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_with_its_type(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("response_format of type json_schema needs json_schema")
        return self


# ---------------------------------------------------------------- messages (2.2)


class TextContentPart(_Request):
    """OpenAI-style content part; only text parts are meaningful to a text model."""

    type: Literal["text"] = "text"
    text: str


class ChatMessage(_Request):
    """A conversation message sent by the caller."""

    role: Role
    content: str | None = Field(
        default=None,
        description="Message text; null beside tool_calls. A list of OpenAI-style text parts "
        "is accepted too and joined.",
    )
    tool_call_id: str | None = Field(default=None, description="Required when role is tool.")
    tool_calls: list[ToolCall] | None = None
    name: str | None = Field(default=None, description="Accepted for compatibility; ignored.")

    @field_validator("content", mode="before")
    @classmethod
    def _join_text_parts(cls, value: Any) -> Any:
        if isinstance(value, list):
            parts = [TextContentPart.model_validate(part) for part in value]
            return "".join(part.text for part in parts)
        return value

    @model_validator(mode="after")
    def _role_rules(self) -> ChatMessage:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id (the id of the call it answers)")
        if self.tool_calls:
            if self.role != "assistant":
                raise ValueError("only assistant messages may carry tool_calls")
            if self.content == "":
                self.content = None  # clients often send "" where the spec wants null
            if self.content is not None:
                raise ValueError("content must be null when tool_calls is set")
        return self


# ---------------------------------------------------------------- requests (4.1 - 4.3)


class StreamOptions(_Request):
    include_usage: bool = Field(
        default=False, description="Send a last chunk with usage and empty choices."
    )


class ChatCompletionRequest(_Request):
    """Body of ``POST /v1/core/chat/completions`` (chat, and groundedness by model name)."""

    model: str
    messages: list[ChatMessage]
    max_tokens: int | None = Field(
        default=None, description="Upper limit on generated tokens; unset means up to the context."
    )
    max_completion_tokens: int | None = Field(
        default=None,
        description="OpenAI's newer name for max_tokens; used when max_tokens is unset.",
    )
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, description="0 to 2; default 0.7.")
    top_p: float | None = Field(default=None, description="In (0, 1]; default 1.")
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = Field(
        default=None,
        description="auto (default with tools), none, required, or a function to force.",
    )
    parallel_tool_calls: bool | None = Field(
        default=None,
        description="Whether a reply may hold several tool calls (default true); false: at "
        "most one.",
    )
    stop: str | list[str] | None = Field(
        default=None, description="Up to 4 sequences where generation stops (not included)."
    )
    seed: int | None = Field(default=None, description="Makes sampling reproducible.")
    n: int | None = Field(default=None, description="Only 1 is supported.")
    response_format: ResponseFormat | None = Field(
        default=None,
        description="text (default), json_object or json_schema; JSON answers are "
        "grammar-constrained, so they always parse (and validate against the schema).",
    )
    logprobs: bool | None = Field(
        default=None,
        description="Return the log-probability of each output token (choices[].logprobs).",
    )
    top_logprobs: int | None = Field(
        default=None,
        description="0 to 20: the most likely tokens listed at each position; needs logprobs.",
    )

    @field_validator("temperature")
    @classmethod
    def _temperature_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 2.0:
            raise ValueError(f"temperature must be between 0 and 2, got {value}")
        return value

    @field_validator("top_p")
    @classmethod
    def _top_p_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 < value <= 1.0:
            raise ValueError(f"top_p must be greater than 0 and at most 1, got {value}")
        return value

    @field_validator("max_tokens", "max_completion_tokens")
    @classmethod
    def _positive_max_tokens(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"max_tokens must be at least 1, got {value}")
        return value

    @field_validator("top_logprobs")
    @classmethod
    def _top_logprobs_range(cls, value: int | None) -> int | None:
        if value is not None and not 0 <= value <= MAX_TOP_LOGPROBS:
            raise ValueError(f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}, got {value}")
        return value

    @field_validator("n")
    @classmethod
    def _single_choice(cls, value: int | None) -> int | None:
        if value is not None and value != 1:
            raise ValueError(f"n must be 1 (one choice per request), got {value}")
        return value

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> list[str] | None:
        if value is None:
            return None
        stops = [value] if isinstance(value, str) else list(value)
        if len(stops) > 4:
            raise ValueError(f"stop takes at most 4 sequences, got {len(stops)}")
        if any(s == "" for s in stops):
            raise ValueError("stop sequences must not be empty")
        return stops or None

    @property
    def token_limit(self) -> int | None:
        """The requested cap on generated tokens, whichever field carried it."""
        return self.max_tokens if self.max_tokens is not None else self.max_completion_tokens

    @property
    def parallel_calls(self) -> bool:
        """Whether a reply may hold several tool calls (OpenAI's default: yes)."""
        return self.parallel_tool_calls is not False

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class EmbeddingRequest(_Request):
    """Body of ``POST /v1/core/embeddings``."""

    model: str
    input: str | list[str] = Field(description="One string or up to 100 strings, none empty.")
    encoding_format: Literal["float", "base64"] = Field(
        default="float",
        description="float (a JSON array) or base64 (little-endian float32 bytes, as OpenAI).",
    )
    dimensions: int | None = Field(
        default=None, description="Accepted only when equal to the model's own dimensionality."
    )

    @field_validator("encoding_format", mode="before")
    @classmethod
    def _default_format(cls, value: Any) -> Any:
        return "float" if value is None else value

    @property
    def inputs(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


# ---------------------------------------------------------------- responses (2.5 - 2.8)


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def new_tool_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def now() -> int:
    return int(time.time())


class Usage(_Response):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class TopLogprob(_Response):
    """One of the most likely tokens at a position (OpenAI's shape)."""

    token: str = Field(description="The token's text (its bytes as UTF-8, with replacement).")
    logprob: float
    bytes: list[int] | None = Field(
        default=None, description="The token's raw UTF-8 bytes (a character may span tokens)."
    )


class TokenLogprob(TopLogprob):
    """An output token, its log-probability and the most likely tokens at its position."""

    top_logprobs: list[TopLogprob] = Field(default_factory=list)


class ChoiceLogprobs(_Response):
    """``choices[].logprobs`` when the request asked for them (null otherwise)."""

    content: list[TokenLogprob] | None = Field(
        default=None, description="The output tokens, in order."
    )


class AssistantMessage(_Response):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] | None = None


class Choice(_Response):
    index: int = 0
    message: AssistantMessage
    logprobs: ChoiceLogprobs | None = Field(
        default=None, description="null unless the request set logprobs."
    )
    finish_reason: FinishReason


class ChatCompletion(_Response):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str = Field(description="The versioned model name actually used.")
    system_fingerprint: str | None = None
    choices: list[Choice]
    usage: Usage


class FunctionCallDelta(_Response):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(_Response):
    index: int = Field(description="Position of the call in the message (OpenAI convention).")
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionCallDelta


class Delta(_Response):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(_Response):
    index: int = 0
    delta: Delta
    logprobs: ChoiceLogprobs | None = Field(
        default=None, description="With logprobs: the entries of the tokens behind this delta."
    )
    finish_reason: FinishReason | None = None


class ChatCompletionChunk(_Response):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str | None = None
    choices: list[ChunkChoice]
    usage: Usage | None = Field(
        default=None, description="Only on the last chunk, when stream_options.include_usage."
    )


class Embedding(_Response):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="Floats, or base64 float32 bytes.")


class EmbeddingUsage(_Response):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(_Response):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage

    def float_vectors(self, expected: int | None = None) -> list[list[float]]:
        """The vectors in input order (by ``index``), as lists of floats.

        Raises:
            ValueError: the vectors came base64-encoded, or there are not ``expected`` of them.
        """
        ordered = sorted(self.data, key=lambda item: item.index)
        if expected is not None and len(ordered) != expected:
            raise ValueError(f"the service returned {len(ordered)} vectors for {expected} inputs")
        vectors = []
        for item in ordered:
            if isinstance(item.embedding, str):
                raise ValueError("the service returned base64 embeddings; float vectors were asked")
            vectors.append(item.embedding)
        return vectors


class ErrorBody(_Response):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(_Response):
    error: ErrorBody


class ModelObject(_Response):
    """One entry of ``GET /v1/core/models`` (OpenAI list shape plus the catalogue's fields)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "core"
    operation: Literal["chat", "groundedness", "embeddings"]
    status: Literal["beta", "deprecated"]
    release_date: str
    context_length: int
    version: str
    deprecation_date: str | None = None
    replaced_by: str | None = None


class ModelList(_Response):
    object: Literal["list"] = "list"
    data: list[ModelObject]
