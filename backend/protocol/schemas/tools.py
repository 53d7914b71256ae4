"""Tool calls and tool definitions (spec 2.3, 2.4) and ``tool_choice``: the calls are part of
both the request's assistant messages and the response's message."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from backend.protocol.schemas.base import RequestModel, ResponseModel


class FunctionCall(ResponseModel):
    name: str = Field(description="Function name.")
    arguments: str = Field(description="The arguments as a JSON string.")


class ToolCall(ResponseModel):
    id: str = Field(description="Identifier of the tool call.")
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDefinition(RequestModel):
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] = Field(
        description="Input parameters as a JSON Schema object (type, properties, required)."
    )


class ToolDefinition(RequestModel):
    type: Literal["function"] = "function"
    function: FunctionDefinition


class ToolChoiceFunction(RequestModel):
    name: str


class ToolChoiceObject(RequestModel):
    type: Literal["function"] = "function"
    function: ToolChoiceFunction


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceObject
