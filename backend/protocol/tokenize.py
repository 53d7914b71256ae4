"""The body and answer of ``POST /v1/core/tokenize``: what a chat model would count.

Not in the spec; the shape follows vLLM's ``/tokenize`` (``count``, ``max_model_len``,
``tokens``), which clients of OpenAI-style servers already read. A chat request's messages
(with its tools and response format) are counted as the model reads them, chat template
included; a string is counted alone, without special tokens.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from backend.protocol.schemas import ChatMessage, ResponseFormat, ToolChoice, ToolDefinition

#: The fields of a chat request that change its prompt, and so its count.
COUNTED_CHAT_FIELDS = ("messages", "tools", "tool_choice", "response_format")


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = Field(description="A chat model (or alias) of the catalogue.")
    input: str | None = Field(default=None, description="A text to count alone.")
    messages: list[ChatMessage] | None = Field(
        default=None, description="A chat request's messages, counted as the prompt."
    )
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None

    @model_validator(mode="after")
    def _one_thing_to_count(self) -> TokenizeRequest:
        if (self.input is None) == (self.messages is None):
            raise ValueError("give either input (a text) or messages (a chat request's)")
        if self.input is not None and (self.tools or self.tool_choice or self.response_format):
            raise ValueError("tools, tool_choice and response_format go with messages")
        if self.messages is not None and not self.messages:
            raise ValueError("messages must hold at least one message")
        return self


class TokenizeResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str = Field(description="The model counted for, as the catalogue names it.")
    count: int = Field(description="Tokens: the prompt's for messages, the text's for input.")
    max_model_len: int = Field(description="The model's context length in tokens.")
    tokens: list[int] | None = Field(default=None, description="The text's token ids (input only).")
