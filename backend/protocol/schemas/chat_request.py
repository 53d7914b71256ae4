"""The body of ``POST /v1/core/chat/completions`` (spec 2.2 and 4.1; the groundedness check of
4.2 is the same body under its model name): messages, ``response_format`` and the request
with its sampling fields, each checked as it is read."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from backend.protocol.schemas.base import RequestModel
from backend.protocol.schemas.tools import ToolCall, ToolChoice, ToolDefinition

Role = Literal["system", "user", "assistant", "tool"]

#: The most alternatives ``top_logprobs`` may ask for (OpenAI's limit).
MAX_TOP_LOGPROBS = 20


# ---------------------------------------------------------------- response_format (OpenAI's)


class JSONSchemaFormat(RequestModel):
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


class ResponseFormat(RequestModel):
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


class TextContentPart(RequestModel):
    """OpenAI-style content part; only text parts are meaningful to a text model."""

    type: Literal["text"] = "text"
    text: str


class ChatMessage(RequestModel):
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


# ---------------------------------------------------------------- the request (4.1, 4.2)


class StreamOptions(RequestModel):
    include_usage: bool = Field(
        default=False, description="Send a last chunk with usage and empty choices."
    )


class ChatCompletionRequest(RequestModel):
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
    core_report: bool | None = Field(
        default=None,
        description="Not in the spec; for the groundedness check only, without stream: true "
        "adds the check's report as the completion's core_report member (the answer is "
        "unchanged; POST /v1/core/groundedness/report answers the report alone).",
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
